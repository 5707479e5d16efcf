import { describe, expect, it } from 'vitest';
import type { EndingInput } from '../../../src/auth-proxy/access-endings.ts';
import { AUTH_ROUTES, endingOf as endingOfRoute } from '../../../src/auth-proxy/auth-routes.ts';
import { compileRoutes } from '../../../src/edge/route.ts';

/** The rule of the `/auth` entry the edge matches, as end-access.ts reads it. */
const read = compileRoutes(AUTH_ROUTES);
const endingRuleOf = (method: string, segments: readonly string[]) =>
  endingOfRoute(read(segments, method));

const none: EndingInput = { query: new URLSearchParams(), form: undefined, json: undefined };
const segments = (path: string) => path.split('/').slice(1);

function endingOf(method: string, path: string, input: Partial<EndingInput> = {}) {
  return endingRuleOf(method, segments(path))?.endingOf({ ...none, ...input });
}

describe('the table of what a request to Keycloak ends', () => {
  it("reads the admin API's session and user actions", () => {
    const admin = '/auth/admin/realms/acme';
    expect(endingOf('DELETE', `${admin}/sessions/s1`)).toEqual({
      kind: 'session',
      realm: 'acme',
      sessionId: 's1',
    });
    const user = (tokens: boolean) => ({ kind: 'user', realm: 'acme', userId: 'u1', tokens });
    expect(endingOf('POST', `${admin}/users/u1/logout`)).toEqual(user(true));
    expect(endingOf('DELETE', `${admin}/users/u1`)).toEqual(user(true));
    expect(endingOf('DELETE', `${admin}/users/u1/`)).toEqual(user(true));
    expect(endingOf('PUT', `${admin}/users/u1/reset-password`)).toEqual({
      ...user(false),
      passwordSet: true,
    });
    expect(endingOf('DELETE', `${admin}/users/u1/consents/acme-api`)).toEqual(user(true));
    // A role taken away: the tokens issued with it are refused. One given ends nothing.
    expect(endingOf('DELETE', `${admin}/users/u1/role-mappings/realm`)).toEqual(user(true));
    expect(endingOf('DELETE', `${admin}/users/u1/role-mappings/clients/c1`)).toEqual(user(true));
    expect(endingOf('DELETE', `${admin}/users/u1/groups/g1`)).toEqual(user(true));
    expect(endingOf('POST', `${admin}/users/u1/role-mappings/clients/c1`)).toBeUndefined();
    expect(endingOf('PUT', `${admin}/users/u1/groups/g1`)).toBeUndefined();
    // A role taken from a group, or the group deleted: its members' (and subgroups') tokens.
    const group = { kind: 'group', realm: 'acme', groupId: 'g1' };
    expect(endingOf('DELETE', `${admin}/groups/g1`)).toEqual(group);
    expect(endingOf('DELETE', `${admin}/groups/g1/role-mappings/realm`)).toEqual(group);
    expect(endingOf('DELETE', `${admin}/groups/g1/role-mappings/clients/c1`)).toEqual(group);
    expect(endingOf('POST', `${admin}/groups/g1/role-mappings/clients/c1`)).toBeUndefined();
    expect(endingOf('PUT', `${admin}/groups/g1`)).toBeUndefined();
    // A group moved (its id in the body) to the top level or under another: its members'.
    const moved = { json: { id: 'g1', name: 'team' } };
    expect(endingOf('POST', `${admin}/groups`, moved)).toEqual(group);
    expect(endingOf('POST', `${admin}/groups/g2/children`, moved)).toEqual(group);
    expect(endingOf('POST', `${admin}/groups`, { json: { name: 'new' } })).toBeUndefined();
    expect(endingOf('POST', `${admin}/groups/g2/children`, { json: { id: 7 } })).toBeUndefined();
    // A role deleted: every token carrying it, by its name (and client) or its id.
    const role = (r: object) => ({ kind: 'role', realm: 'acme', role: r });
    expect(endingOf('DELETE', `${admin}/roles/r1`)).toEqual(role({ name: 'r1' }));
    expect(endingOf('DELETE', `${admin}/clients/c1/roles/r1`)).toEqual(
      role({ name: 'r1', clientUuid: 'c1' }),
    );
    expect(endingOf('DELETE', `${admin}/roles-by-id/i1`)).toEqual(role({ id: 'i1' }));
    expect(endingOf('PUT', `${admin}/roles/r1`)).toBeUndefined();
    // Roles taken from a composite: the ids Keycloak reads, once each; none, nothing ended.
    const taken = { json: [{ id: 'i2', name: 'forged' }, { id: 'i2' }, { name: 'x' }, null] };
    const composite = { kind: 'composite', realm: 'acme', roleIds: ['i2'] };
    for (const path of ['roles/r1', 'clients/c1/roles/r1', 'roles-by-id/i1'])
      expect(endingOf('DELETE', `${admin}/${path}/composites`, taken)).toEqual(composite);
    expect(endingOf('DELETE', `${admin}/roles/r1/composites`, { json: {} })).toBeUndefined();
    expect(endingOf('POST', `${admin}/roles/r1/composites`, taken)).toBeUndefined();
    // A client deleted: the tokens carrying one of its roles.
    const client = { kind: 'client', realm: 'acme', clientUuid: 'c1' };
    expect(endingOf('DELETE', `${admin}/clients/c1`)).toEqual(client);
    expect(endingOf('PUT', `${admin}/clients/c1`)).toBeUndefined();
    expect(endingOf('POST', `${admin}/logout-all`)).toEqual({ kind: 'realm', realm: 'acme' });
    expect(endingOf('POST', `${admin}/components`)).toEqual({ kind: 'keys', realm: 'acme' });
    expect(endingOf('PUT', `${admin}/components/c1`)).toEqual({ kind: 'keys', realm: 'acme' });
    expect(endingOf('DELETE', `${admin}/components/c1`)).toEqual({ kind: 'keys', realm: 'acme' });
  });

  it('reads a user update as a disable only when it sets `enabled` to anything but true', () => {
    const path = '/auth/admin/realms/acme/users/u1';
    expect(endingRuleOf('PUT', segments(path))?.readsJson).toBe(true);
    expect(endingOf('PUT', path, { json: { enabled: false } })).toMatchObject({ kind: 'user' });
    expect(endingOf('PUT', path, { json: { enabled: 'false' } })).toMatchObject({ kind: 'user' });
    expect(endingOf('PUT', path, { json: { enabled: true } })).toBeUndefined();
    expect(endingOf('PUT', path, { json: { firstName: 'A' } })).toBeUndefined();
    expect(endingOf('PUT', path, { json: undefined })).toBeUndefined();
  });

  it('reads a user update that carries credentials as a password set', () => {
    const path = '/auth/admin/realms/acme/users/u1';
    const credentials = [{ type: 'password', value: 'new', temporary: false }];
    const user = { kind: 'user', realm: 'acme', userId: 'u1' };
    expect(endingOf('PUT', path, { json: { credentials } })).toEqual({
      ...user,
      tokens: false,
      passwordSet: true,
    });
    expect(endingOf('PUT', path, { json: { enabled: false, credentials } })).toEqual({
      ...user,
      tokens: true,
      passwordSet: true,
    });
    expect(endingOf('PUT', path, { json: { credentials: [] } })).toBeUndefined();
    expect(endingOf('PUT', path, { json: { credentials: 'new' } })).toBeUndefined();
  });

  it("reads a required action or a credential removed as the end of the user's Basic logins", () => {
    const path = '/auth/admin/realms/acme/users/u1';
    const basicOnly = { kind: 'user', realm: 'acme', userId: 'u1', tokens: false };
    expect(endingOf('PUT', path, { json: { requiredActions: ['CONFIGURE_TOTP'] } })).toEqual(
      basicOnly,
    );
    expect(endingOf('PUT', path, { json: { enabled: false, requiredActions: ['x'] } })).toEqual({
      ...basicOnly,
      tokens: true,
    });
    // The console sends the list with every save of the user: an empty one changes nothing.
    expect(endingOf('PUT', path, { json: { requiredActions: [] } })).toBeUndefined();
    expect(endingOf('DELETE', `${path}/credentials/c1`)).toEqual(basicOnly);
    expect(endingOf('PUT', `${path}/disable-credential-types`)).toEqual(basicOnly);
    expect(endingOf('PUT', `${path}/credentials/c1/userLabel`)).toBeUndefined();
  });

  it('reads a realm update as the end of its sessions when it sets a not-before', () => {
    const path = '/auth/admin/realms/acme';
    expect(endingRuleOf('PUT', segments(path))?.readsJson).toBe(true);
    // The console's "Set to now" sends `Date.now() / 1000`; Keycloak keeps whole seconds.
    expect(endingOf('PUT', path, { json: { realm: 'acme', notBefore: 1764064800.75 } })).toEqual({
      kind: 'realm',
      realm: 'acme',
      notBefore: 1764064800000,
    });
    expect(endingOf('PUT', path, { json: { realm: 'acme', notBefore: 0 } })).toBeUndefined();
    expect(endingOf('PUT', path, { json: { displayName: 'Acme' } })).toBeUndefined();
    expect(endingOf('PUT', path, { json: 'x' })).toBeUndefined();
  });

  it("reads the client's logout and revocation, with one value per parameter", () => {
    const oidc = '/auth/realms/acme/protocol/openid-connect';
    const form = (text: string) => ({ form: new URLSearchParams(text) });
    expect(endingOf('POST', `${oidc}/logout`, form('refresh_token=r&client_id=c'))).toEqual({
      kind: 'logout',
      realm: 'acme',
      refreshToken: 'r',
    });
    expect(endingOf('POST', `${oidc}/logout`, form('id_token_hint=i'))).toEqual({
      kind: 'logout',
      realm: 'acme',
      idTokenHint: 'i',
    });
    expect(
      endingOf('GET', `${oidc}/logout`, { query: new URLSearchParams('id_token_hint=i') }),
    ).toEqual({ kind: 'logout', realm: 'acme', idTokenHint: 'i' });
    expect(endingOf('POST', `${oidc}/revoke`, form('token=t'))).toEqual({
      kind: 'revoke',
      realm: 'acme',
      token: 't',
    });
    // Sent twice, a parameter could be read two ways: nothing is ended on it.
    expect(endingOf('POST', `${oidc}/revoke`, form('token=t&token=u'))).toBeUndefined();
    expect(endingOf('POST', `${oidc}/logout`, form('refresh_token='))).toBeUndefined();
    expect(endingOf('POST', `${oidc}/logout`)).toBeUndefined();
    // Keycloak reads a form with `refresh_token` as a refresh-token logout, never its hint.
    const twice = form('refresh_token=r&refresh_token=r&id_token_hint=i');
    expect(endingOf('POST', `${oidc}/logout`, twice)).toBeUndefined();
    expect(
      endingOf('POST', `${oidc}/logout`, form('refresh_token=&id_token_hint=i')),
    ).toBeUndefined();
  });

  it("reads the admin console's own endpoints (ui-ext) as the admin API's they stand for", () => {
    const admin = '/auth/admin/realms/acme';
    // Keycloak 26's console saves a realm's settings with `PUT .../ui-ext` (the admin API's realm
    // update behind it): lifetimes, and the not-before of "Revocation: Set to now".
    for (const path of [`${admin}/ui-ext`, `${admin}/ui-ext/`]) {
      expect(endingRuleOf('PUT', segments(path))?.changesLifetimes).toBe(true);
      expect(endingOf('PUT', path, { json: { notBefore: 5 } })).toEqual({
        kind: 'realm',
        realm: 'acme',
        notBefore: 5000,
      });
    }
    expect(endingOf('PUT', `${admin}/ui-ext`, { json: { notBefore: 0 } })).toBeUndefined();
    // Its "Unassign" takes roles (by id) from a user, a group or a composite in one POST.
    const taken = { json: [{ roleId: 'i1', roleName: 'ws' }, { roleId: 'i1' }, { roleId: 'i2' }] };
    const mappings = `${admin}/ui-ext/role-mapping-delete`;
    expect(endingOf('POST', `${mappings}/users/u1`, taken)).toEqual({
      kind: 'user',
      realm: 'acme',
      userId: 'u1',
      tokens: true,
    });
    expect(endingOf('POST', `${mappings}/groups/g1`, taken)).toEqual({
      kind: 'group',
      realm: 'acme',
      groupId: 'g1',
    });
    expect(endingOf('POST', `${mappings}/roles/r1`, taken)).toEqual({
      kind: 'composite',
      realm: 'acme',
      roleIds: ['i1', 'i2'],
    });
    expect(endingOf('POST', `${mappings}/roles/r1`, { json: [{ id: 'i1' }] })).toBeUndefined();
    // What the console only reads ends nothing.
    expect(endingRuleOf('GET', segments(`${admin}/ui-ext/info`))).toBeUndefined();
    expect(
      endingRuleOf('GET', segments(`${admin}/ui-ext/effective-roles/users/u1`)),
    ).toBeUndefined();
  });

  it('leaves every other request alone', () => {
    expect(endingRuleOf('GET', segments('/auth/admin/realms/acme/users/u1'))).toBeUndefined();
    expect(
      endingRuleOf('POST', segments('/auth/realms/acme/protocol/openid-connect/token')),
    ).toBeUndefined();
    expect(endingRuleOf('DELETE', segments('/auth/admin/realms/acme/sessions'))).toBeUndefined();
    expect(endingRuleOf('DELETE', segments('/api/admin/realms/acme/sessions/s1'))).toBeUndefined();
  });

  it("counts only Keycloak's success", () => {
    const admin = endingRuleOf('POST', segments('/auth/admin/realms/acme/users/u1/logout'))!;
    const statusesOf = (rule: typeof admin, statuses: number[]) =>
      statuses.map((status) => rule.succeeded(status, undefined));
    expect(statusesOf(admin, [200, 204])).toEqual([true, true]);
    expect(statusesOf(admin, [302, 400, 403, 404, 500])).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
    const logout = endingRuleOf(
      'GET',
      segments('/auth/realms/acme/protocol/openid-connect/logout'),
    )!;
    expect(statusesOf(logout, [204, 302])).toEqual([true, true]);
    expect(statusesOf(logout, [400, 502])).toEqual([false, false]);
  });

  /** What the proxy hands the rule of `body` (hooked-answer.ts): its size, and its marker's presence. */
  const readAs = (rule: { answerMarker?: Buffer }, body: Buffer) => ({
    bytes: body.length,
    marked: rule.answerMarker !== undefined && body.includes(rule.answerMarker),
  });

  it("counts a logout's page only when it is not Keycloak's confirmation page", () => {
    for (const method of ['GET', 'POST']) {
      const logout = endingRuleOf(
        method,
        segments('/auth/realms/acme/protocol/openid-connect/logout'),
      )!;
      expect(logout.readsAnswer).toBe(true);
      const page = (body: string) =>
        Buffer.from(`<!DOCTYPE html><html><body>${body}</body></html>`);
      expect(logout.succeeded(200, readAs(logout, page('<p>You are logged out</p>')))).toBe(true);
      // Shown when the logout needs the user's word: nothing is ended until it is given.
      const confirm =
        '<form action="https://gw.example/auth/realms/acme/protocol/openid-connect/logout/logout-confirm?client_id=a&amp;tab_id=t" method="POST">';
      expect(logout.succeeded(200, readAs(logout, page(confirm)))).toBe(false);
      // No page to read (HEAD, or an answer the proxy did not read) proves nothing.
      expect(logout.succeeded(200, readAs(logout, Buffer.alloc(0)))).toBe(false);
      expect(logout.succeeded(200, undefined)).toBe(false);
    }
  });

  it("counts a revocation only when Keycloak's 200 has no error in it", () => {
    const revoke = endingRuleOf(
      'POST',
      segments('/auth/realms/acme/protocol/openid-connect/revoke'),
    )!;
    expect(revoke.readsAnswer).toBe(true);
    expect(revoke.succeeded(200, readAs(revoke, Buffer.alloc(0)))).toBe(true);
    // RFC 7009's 200 to a token Keycloak does not accept: forged, expired, of an ended session.
    const refused = Buffer.from('{"error":"invalid_token","error_description":"Invalid token"}');
    expect(revoke.succeeded(200, readAs(revoke, refused))).toBe(false);
    // An answer the proxy did not read (compressed) proves nothing.
    expect(revoke.succeeded(200, undefined)).toBe(false);
    expect(revoke.succeeded(400, readAs(revoke, Buffer.alloc(0)))).toBe(false);
  });

  it("marks the admin requests that can shorten the realm's token lifetime, and no other", () => {
    const admin = '/auth/admin/realms/acme';
    const changesLifetimes = (method: string, path: string) =>
      endingRuleOf(method, segments(path))?.changesLifetimes === true;
    expect(changesLifetimes('PUT', admin)).toBe(true);
    expect(changesLifetimes('PUT', `${admin}/clients/c1`)).toBe(true);
    expect(changesLifetimes('DELETE', `${admin}/clients/c1`)).toBe(true);
    expect(changesLifetimes('POST', `${admin}/partialImport`)).toBe(true);
    // A client created adds a lifetime; a user, a role or a session changes none.
    expect(changesLifetimes('POST', `${admin}/clients`)).toBe(false);
    expect(changesLifetimes('PUT', `${admin}/users/u1`)).toBe(false);
    expect(changesLifetimes('DELETE', `${admin}/roles/r1`)).toBe(false);
    expect(changesLifetimes('DELETE', admin)).toBe(false);
    // A client update ends nothing itself.
    expect(endingOf('PUT', `${admin}/clients/c1`, { json: { notBefore: 5 } })).toBeUndefined();
  });
});
