import { randomBytes, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { generateKeyPair, SignJWT } from 'jose';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { browserCodeLogin, createBrowserClient } from '../helpers/browser-login.ts';
import {
  claimsOf,
  createUser,
  keycloakAdmin,
  uniqueId,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startGzipFront, type GzipFront } from '../helpers/gzip-front.ts';
import { consoleToken } from '../helpers/lifetime-suite.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';

// Two replicas sharing Redis: each request that ends something goes through replica A; B must
// refuse at once. B never re-checks tokens with Keycloak and keeps Basic logins an hour, so
// only the revocation A shares can make it refuse.

interface Grant {
  access: string;
  refresh: string;
  id: string;
}

let a: Replica;
let adminUrlA: string;
let replicaB: Replica;
const b = () => replicaB.url;

/** A password grant through B's public listener: `scope` as a client would ask. */
async function grant(user: TestUser, scope = 'openid'): Promise<Grant> {
  const res = await fetch(`${b()}/auth/realms/${user.realm}/protocol/openid-connect/token`, {
    method: 'POST',
    body: new URLSearchParams({
      client_id: apiClientIdOf(user.realm),
      grant_type: 'password',
      scope,
      username: user.username,
      password: user.password,
    }),
  });
  const json = (await res.json()) as Record<string, string>;
  expect(res.status).toBe(200);
  return { access: json.access_token!, refresh: json.refresh_token!, id: json.id_token! };
}

/** B's answer to an API call with `authorization`. */
async function statusOnB(realm: string, authorization: string): Promise<number> {
  const res = await fetch(`${b()}/api/${realm}/platform/workspaces`, {
    headers: { authorization },
  });
  return res.status;
}

/** POSTs a form to the realm's OIDC `endpoint` through A's public listener. */
async function postOidc(realm: string, endpoint: string, fields: Record<string, string>) {
  return fetch(`${a.url}/auth/realms/${realm}/protocol/openid-connect/${endpoint}`, {
    method: 'POST',
    body: new URLSearchParams({ client_id: apiClientIdOf(realm), ...fields }),
    redirect: 'manual',
  });
}

/** Keycloak's bootstrap administrator's token, through A's admin listener. */
const adminToken = () => consoleToken(a);

/** An admin-API call through A's admin listener, as the console makes it; its status. */
async function adminCall(method: string, path: string, body?: unknown): Promise<number> {
  const res = await fetch(`${adminUrlA}/auth/admin/realms/${path}`, {
    method,
    headers: {
      authorization: `Bearer ${await adminToken()}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  await res.arrayBuffer();
  return res.status;
}

/** The calls of `kind` a replica has made to Keycloak so far (its metrics). */
async function keycloakCalls(replica: Replica, kind: 'admin' | 'jwks'): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/metrics`);
  return (await res.text())
    .split('\n')
    .filter((line) => line.startsWith(`realmgate_keycloak_requests_total{kind="${kind}"`))
    .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
}
const adminCalls = (replica: Replica) => keycloakCalls(replica, 'admin');

/** Two browser-flow clients of the realm, as two applications sharing the user's session. */
async function createBrowserClients(realm: string): Promise<[string, string]> {
  return [await createBrowserClient(realm, 'app-a'), await createBrowserClient(realm, 'app-b')];
}

/** A user whose token B has verified and cached (200). */
async function servedUser(realm: string, scope?: string) {
  const user = await createUser(realm);
  const tokens = await grant(user, scope);
  expect(await statusOnB(realm, `Bearer ${tokens.access}`)).toBe(200);
  return { user, tokens, id: await userIdOf(user) };
}

/** Waits for B to refuse; prints how long after A answered (docs/security-model.md's figures). */
async function refusedOnB(realm: string, authorization: string): Promise<void> {
  const started = performance.now();
  await expect.poll(() => statusOnB(realm, authorization), EVENTUALLY).toBe(401);
  const ms = Math.round(performance.now() - started);
  console.log(`${expect.getState().currentTestName}: refused on the other replica after ${ms} ms`);
}

/**
 * Waits until B has applied everything A shared so far: A ends a marker user's access, and
 * revocations reach B in the order A sent them. After it, what B still serves, nothing ended.
 */
async function settled(realm: string): Promise<void> {
  const marker = await servedUser(realm);
  expect(await adminCall('POST', `${realm}/users/${marker.id}/logout`)).toBe(204);
  await refusedOnB(realm, `Bearer ${marker.tokens.access}`);
}

/** How many Keycloak sessions the user has: a cached Basic login dropped logs in anew. */
async function sessionCount(realm: string, user: TestUser): Promise<number> {
  const admin = await keycloakAdmin();
  return (await admin.users.listSessions({ realm, id: await userIdOf(user) })).length;
}

/** Polls until B logs the user in anew (the cached Basic login dropped), the password good. */
async function loggedInAgainOnB(realm: string, user: TestUser, before: number): Promise<void> {
  await expect
    .poll(async () => {
      expect(await statusOnB(realm, basicAuth(user))).toBe(200);
      return sessionCount(realm, user);
    }, EVENTUALLY)
    .toBeGreaterThan(before);
}

/**
 * The revocations of `realm` the replicas share from now on, as a replica hears them on Redis:
 * whom each names (its list of users, else its one user).
 */
async function heardRevocations(realm: string) {
  const listener = new Redis(testEnv().redisUrl);
  const named: string[][] = [];
  listener.on('message', (_channel: string, payload: string) => {
    const message = JSON.parse(payload) as { realm: string; userId: string; userIds?: string[] };
    if (message.realm === realm) named.push(message.userIds ?? [message.userId]);
  });
  await listener.subscribe(`${testEnv().redisKeyPrefix}revocations`);
  return { named, close: () => listener.quit() };
}

/** A token with `claims`, signed by a key Keycloak never had. */
async function forged(claims: Record<string, unknown>, kid: unknown): Promise<string> {
  const { privateKey } = await generateKeyPair('RS256');
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: String(kid) })
    .sign(privateKey);
}

const headerOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[0]!, 'base64url').toString()) as Record<string, unknown>;

let org: string;
// One cache secret, as replicas sharing Redis are deployed: they share what it keys (cached
// logins, the wrong passwords the login throttle remembers).
const shared = {
  REDIS_URL: testEnv().redisUrl,
  REDIS_KEY_PREFIX: testEnv().redisKeyPrefix,
  REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
  // No scheduled key-set fetch during a test: the key providers' test counts the fetches.
  KEY_SET_REFRESH_SECONDS: '3600',
};
beforeAll(async () => {
  a = await startReplica(19440, shared);
  replicaB = await startReplica(19442, {
    ...shared,
    REVOCATION_CHECK_SECONDS: 'off',
    BASIC_CACHE_MAX_SECONDS: '3600',
  });
  adminUrlA = `http://127.0.0.1:${a.config.ADMIN_PORT}`;
  org = await createOrganization(['ws']);
});
afterAll(async () => {
  await Promise.all([a?.gateway.close(), replicaB?.gateway.close()]);
  await closeTestDb();
});

describe('what a client ends on /auth ends on every replica at once', () => {
  it('a logout with a refresh token refuses its access token on the other replica', async () => {
    const { tokens } = await servedUser(org);
    const res = await postOidc(org, 'logout', { refresh_token: tokens.refresh });
    expect(res.status).toBe(204);
    await refusedOnB(org, `Bearer ${tokens.access}`);
  });

  it('a logout with an ID token hint (GET and POST) refuses its access token on the other replica', async () => {
    const byGet = await servedUser(org);
    const query = new URLSearchParams({ id_token_hint: byGet.tokens.id });
    const res = await fetch(
      `${a.url}/auth/realms/${org}/protocol/openid-connect/logout?${query.toString()}`,
      { redirect: 'manual' },
    );
    expect(res.status).toBeLessThan(400);
    await refusedOnB(org, `Bearer ${byGet.tokens.access}`);

    const byPost = await servedUser(org);
    const posted = await postOidc(org, 'logout', { id_token_hint: byPost.tokens.id });
    expect(posted.status).toBeLessThan(400);
    await refusedOnB(org, `Bearer ${byPost.tokens.access}`);
  });

  it('revoking an access token (RFC 7009) refuses that token, not its session', async () => {
    const { user, tokens } = await servedUser(org);
    const res = await postOidc(org, 'revoke', { token: tokens.access });
    expect(res.status).toBe(200);
    await refusedOnB(org, `Bearer ${tokens.access}`);
    // The session lives on: a refreshed token is served.
    const refreshed = await fetch(`${b()}/auth/realms/${org}/protocol/openid-connect/token`, {
      method: 'POST',
      body: new URLSearchParams({
        client_id: apiClientIdOf(user.realm),
        grant_type: 'refresh_token',
        refresh_token: tokens.refresh,
      }),
    });
    expect(refreshed.status).toBe(200);
    const access = ((await refreshed.json()) as { access_token: string }).access_token;
    expect(await statusOnB(org, `Bearer ${access}`)).toBe(200);
  });

  it("revoking a refresh token (RFC 7009) refuses its client's access tokens of that session, and no other's", async () => {
    const user = await createUser(org);
    const [appA, appB] = await createBrowserClients(org);
    const jar = new Map<string, string>();
    const ofA = await browserCodeLogin(b(), user, appA, jar);
    const ofB = await browserCodeLogin(b(), user, appB, jar);
    expect(claimsOf(ofB.access).sid).toBe(claimsOf(ofA.access).sid);
    const otherSession = await grant(user);
    for (const { access } of [ofA, ofB, otherSession])
      expect(await statusOnB(org, `Bearer ${access}`)).toBe(200);

    const res = await postOidc(org, 'revoke', {
      client_id: appA,
      token: ofA.refresh,
      token_type_hint: 'refresh_token',
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
    await refusedOnB(org, `Bearer ${ofA.access}`);
    // Keycloak ended app-a's part of the session only: app-b and the user's other session stay.
    await settled(org);
    expect(await statusOnB(org, `Bearer ${ofB.access}`)).toBe(200);
    expect(await statusOnB(org, `Bearer ${otherSession.access}`)).toBe(200);
  });

  it('revoking an offline token (RFC 7009) refuses the access tokens issued from it', async () => {
    const { tokens } = await servedUser(org, 'openid offline_access');
    expect(claimsOf(tokens.refresh).typ).toBe('Offline');
    const res = await postOidc(org, 'revoke', { token: tokens.refresh });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
    await refusedOnB(org, `Bearer ${tokens.access}`);
  });

  it('a refused or forged logout or revocation ends nothing', async () => {
    const victim = await servedUser(org);
    const claims = claimsOf(victim.tokens.access);
    // A token of the victim's claims, signed by another key: Keycloak says 200 (RFC 7009).
    const forgedAccess = await forged(claims, headerOf(victim.tokens.access).kid);
    expect((await postOidc(org, 'revoke', { token: forgedAccess })).status).toBe(200);
    // A refresh token naming the victim's session, its signature broken: Keycloak refuses it.
    const [head, body] = victim.tokens.refresh.split('.');
    const badRefresh = `${head}.${body}.${Buffer.from('forged').toString('base64url')}`;
    expect((await postOidc(org, 'logout', { refresh_token: badRefresh })).status).toBe(400);
    // The same sent for revocation: Keycloak's 200 (RFC 7009) says it did not accept it.
    const revoked = await postOidc(org, 'revoke', { token: badRefresh });
    expect(revoked.status).toBe(200);
    expect(await revoked.json()).toMatchObject({ error: 'invalid_token' });
    // The victim's real refresh token, sent by another client: Keycloak refuses it.
    expect(
      (await postOidc(org, 'revoke', { client_id: 'admin-cli', token: victim.tokens.refresh }))
        .status,
    ).toBe(400);
    // An ID token hint naming the victim's session, signed by another key.
    const forgedId = await forged(claimsOf(victim.tokens.id), headerOf(victim.tokens.id).kid);
    const hinted = await postOidc(org, 'logout', { id_token_hint: forgedId });
    expect(hinted.status).toBeGreaterThanOrEqual(400);
    // An admin request Keycloak refuses: no such user.
    expect(await adminCall('POST', `${org}/users/${claims.sid as string}/logout`)).toBe(404);

    await settled(org);
    expect(await statusOnB(org, `Bearer ${victim.tokens.access}`)).toBe(200);
  });
});

describe("the admin listener's session and user actions end access on every replica at once", () => {
  it('a session deleted', async () => {
    const { tokens } = await servedUser(org);
    const sid = claimsOf(tokens.access).sid as string;
    expect(await adminCall('DELETE', `${org}/sessions/${sid}`)).toBe(204);
    await refusedOnB(org, `Bearer ${tokens.access}`);
  });

  it('a user logged out', async () => {
    const { tokens, id } = await servedUser(org);
    expect(await adminCall('POST', `${org}/users/${id}/logout`)).toBe(204);
    await refusedOnB(org, `Bearer ${tokens.access}`);
  });

  it('a user disabled', async () => {
    const { tokens, id } = await servedUser(org);
    expect(await adminCall('PUT', `${org}/users/${id}`, { enabled: false })).toBe(204);
    await refusedOnB(org, `Bearer ${tokens.access}`);
  });

  it('a user update Keycloak would read in another encoding than UTF-8 (UTF-16, a BOM) is refused, and changes nothing', async () => {
    // Keycloak reads a JSON body in the encoding its bytes suggest, whatever the charset says:
    // the gateway, reading UTF-8, would see no change and end nothing.
    const { tokens, id } = await servedUser(org);
    const json = JSON.stringify({ enabled: false });
    const utf16le = Buffer.from(json, 'utf16le');
    for (const [name, contentType, body] of [
      [
        'UTF-16BE, BOM',
        'application/json; charset=UTF-16',
        Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(utf16le).swap16()]),
      ],
      ['UTF-16LE', 'application/json', utf16le],
      [
        'UTF-8, BOM',
        'application/json',
        Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(json)]),
      ],
      ['UTF-8 named IBM037', 'application/json; charset=IBM037', Buffer.from(json)],
    ] as const) {
      const res = await fetch(`${adminUrlA}/auth/admin/realms/${org}/users/${id}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${await adminToken()}`, 'content-type': contentType },
        body,
      });
      expect({ name, status: res.status, body: await res.text() }).toEqual({
        name,
        status: 400,
        body: JSON.stringify({
          error: 'invalid_request',
          error_description: 'JSON body must be UTF-8.',
        }),
      });
    }
    const admin = await keycloakAdmin();
    expect((await admin.users.findOne({ realm: org, id }))?.enabled).toBe(true);
    expect(await statusOnB(org, `Bearer ${tokens.access}`)).toBe(200);
  });

  it('a user deleted', async () => {
    const { tokens, id } = await servedUser(org);
    expect(await adminCall('DELETE', `${org}/users/${id}`)).toBe(204);
    await refusedOnB(org, `Bearer ${tokens.access}`);
  });

  it('a workspace role unassigned (a client role mapping removed, as the console does)', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws'] });
    const tokens = await grant(user);
    const id = await userIdOf(user);
    const operations = `/api/${org}/workspaces/ws/ita/menu/operation_list/filter/`;
    const onB = async () =>
      (
        await fetch(`${b()}${operations}`, {
          headers: { authorization: `Bearer ${tokens.access}` },
        })
      ).status;
    expect(await onB()).toBe(200);
    const admin = await keycloakAdmin();
    const [client] = await admin.clients.find({ realm: org, clientId: `${org}-workspaces` });
    const role = await admin.clients.findRole({ realm: org, id: client!.id!, roleName: 'ws' });
    const path = `${org}/users/${id}/role-mappings/clients/${client!.id!}`;
    expect(await adminCall('DELETE', path, [role])).toBe(204);
    // The token still names the role it was issued with: it must not reach the workspace.
    await expect.poll(onB, EVENTUALLY).toBe(401);
  });

  /**
   * A group holding workspace role `ws`, a subgroup (which inherits it), a member of each and a
   * user who holds `ws` of their own; each user's token served by B on the workspace's route.
   */
  async function groupWithMembers() {
    const admin = await keycloakAdmin();
    const [client] = await admin.clients.find({ realm: org, clientId: `${org}-workspaces` });
    const clientUuid = client!.id!;
    const role = await admin.clients.findRole({ realm: org, id: clientUuid, roleName: 'ws' });
    const { id: groupId } = await admin.groups.create({ realm: org, name: uniqueId('team-') });
    const { id: childId } = await admin.groups.createChildGroup(
      { realm: org, id: groupId },
      { name: uniqueId('sub-') },
    );
    const roles = [{ id: role!.id!, name: role!.name! }];
    await admin.groups.addClientRoleMappings({
      realm: org,
      id: groupId,
      clientUniqueId: clientUuid,
      roles,
    });
    const tokenOf = async (group?: string, workspaceRoles?: string[]) => {
      const user = await createUser(org, { workspaceRoles });
      if (group)
        await admin.users.addToGroup({ realm: org, id: await userIdOf(user), groupId: group });
      return (await grant(user)).access;
    };
    const member = await tokenOf(groupId);
    const subMember = await tokenOf(childId);
    const outsider = await tokenOf(undefined, ['ws']);
    for (const token of [member, subMember, outsider]) expect(await workspaceOnB(token)).toBe(200);
    return { groupId, clientUuid, role, member, subMember, outsider };
  }

  const workspaceOnB = async (token: string) =>
    (
      await fetch(`${b()}/api/${org}/workspaces/ws/ita/menu/operation_list/filter/`, {
        headers: { authorization: `Bearer ${token}` },
      })
    ).status;

  it("a workspace role taken from a group ends its members' tokens, its subgroups' too, and no one else's", async () => {
    const { groupId, clientUuid, role, member, subMember, outsider } = await groupWithMembers();
    const path = `${org}/groups/${groupId}/role-mappings/clients/${clientUuid}`;
    expect(await adminCall('DELETE', path, [role])).toBe(204);
    await expect.poll(() => workspaceOnB(member), EVENTUALLY).toBe(401);
    await expect.poll(() => workspaceOnB(subMember), EVENTUALLY).toBe(401);
    await settled(org);
    expect(await workspaceOnB(outsider)).toBe(200);
  });

  it("a group deleted ends its members' tokens, its subgroups' too, and no one else's", async () => {
    const { groupId, member, subMember, outsider } = await groupWithMembers();
    expect(await adminCall('DELETE', `${org}/groups/${groupId}`)).toBe(204);
    await expect.poll(() => workspaceOnB(member), EVENTUALLY).toBe(401);
    await expect.poll(() => workspaceOnB(subMember), EVENTUALLY).toBe(401);
    await settled(org);
    expect(await workspaceOnB(outsider)).toBe(200);
  });

  it("a workspace role taken from a group of 600 members ends each one's tokens, past the first pages too, in one message between replicas, and no one else's", async () => {
    const { groupId, clientUuid, role, member, subMember, outsider } = await groupWithMembers();
    const admin = await keycloakAdmin();
    const group = await admin.groups.findOne({ realm: org, id: groupId });
    // Imported a hundred at a time, without credentials. Keycloak lists members by user name:
    // these come before the member whose token B serves, who is read past the first pages.
    const imported: string[] = [];
    for (let batch = 0; batch < 6; batch++) {
      const { results } = await admin.realms.partialImport({
        realm: org,
        rep: {
          ifResourceExists: 'FAIL',
          users: Array.from({ length: 100 }, () => ({
            username: uniqueId('a-'),
            enabled: true,
            groups: [group!.path!],
          })),
        },
      });
      imported.push(...results.map((result) => result.id));
    }
    const members = new Set([
      ...imported,
      claimsOf(member).sub as string,
      claimsOf(subMember).sub as string,
    ]);
    expect(members.size).toBe(602);
    const heard = await heardRevocations(org);
    try {
      const path = `${org}/groups/${groupId}/role-mappings/clients/${clientUuid}`;
      expect(await adminCall('DELETE', path, [role])).toBe(204);
      await expect.poll(() => workspaceOnB(member), EVENTUALLY).toBe(401);
      await expect.poll(() => workspaceOnB(subMember), EVENTUALLY).toBe(401);
      await settled(org);
      expect(await workspaceOnB(outsider)).toBe(200);
      // Every member named, by as few messages as their number allows (each replica applies each
      // message, and a replica that starts later reads each stored one).
      const ofMembers = () => heard.named.filter((ids) => ids.some((id) => members.has(id)));
      await expect.poll(() => new Set(ofMembers().flat()), EVENTUALLY).toEqual(members);
      expect(ofMembers()).toHaveLength(1);
    } finally {
      await heard.close();
    }
  });

  it('a change to a group Keycloak does not know gets its answer (404), as any other change', async () => {
    const unknown = randomUUID();
    expect(await adminCall('DELETE', `${org}/groups/${unknown}`)).toBe(404);
    expect(await adminCall('DELETE', `${org}/groups/${unknown}/role-mappings/realm`, [])).toBe(404);
    expect(await adminCall('POST', `${org}/groups`, { id: unknown, name: uniqueId('x-') })).toBe(
      404,
    );
  });

  it('a workspace role deleted ends every token carrying it (held directly or through a group), and no other', async () => {
    const realm = await createOrganization(['ws', 'other']);
    const admin = await keycloakAdmin();
    const [client] = await admin.clients.find({ realm, clientId: `${realm}-workspaces` });
    const clientUuid = client!.id!;
    const role = await admin.clients.findRole({ realm, id: clientUuid, roleName: 'ws' });
    const { id: groupId } = await admin.groups.create({ realm, name: uniqueId('team-') });
    const roles = [{ id: role!.id!, name: role!.name! }];
    await admin.groups.addClientRoleMappings({
      realm,
      id: groupId,
      clientUniqueId: clientUuid,
      roles,
    });
    const holder = await grant(await createUser(realm, { workspaceRoles: ['ws'] }));
    const member = await createUser(realm);
    await admin.users.addToGroup({ realm, id: await userIdOf(member), groupId });
    const memberToken = await grant(member);
    const outsider = await grant(await createUser(realm, { workspaceRoles: ['other'] }));
    const onB = async (ws: string, token: string) =>
      (
        await fetch(`${b()}/api/${realm}/workspaces/${ws}/ita/menu/operation_list/filter/`, {
          headers: { authorization: `Bearer ${token}` },
        })
      ).status;
    expect(await onB('ws', holder.access)).toBe(200);
    expect(await onB('ws', memberToken.access)).toBe(200);
    expect(await onB('other', outsider.access)).toBe(200);
    // The console's "Delete" of the client role.
    expect(await adminCall('DELETE', `${realm}/clients/${clientUuid}/roles/ws`)).toBe(204);
    await expect.poll(() => onB('ws', holder.access), EVENTUALLY).toBe(401);
    await expect.poll(() => onB('ws', memberToken.access), EVENTUALLY).toBe(401);
    await settled(realm);
    expect(await onB('other', outsider.access)).toBe(200);
  });

  it('a realm role deleted (by name) ends the tokens and cached Basic logins that carry it, and no others', async () => {
    const admin = await keycloakAdmin();
    const name = uniqueId('reader-');
    await admin.roles.create({ realm: org, name });
    const role = await admin.roles.findOneByName({ realm: org, name });
    const holder = await createUser(org);
    await admin.users.addRealmRoleMappings({
      realm: org,
      id: await userIdOf(holder),
      roles: [{ id: role!.id!, name }],
    });
    const bearer = `Bearer ${(await grant(holder)).access}`;
    expect(await statusOnB(org, bearer)).toBe(200);
    expect(await statusOnB(org, basicAuth(holder))).toBe(200);
    const outsider = await servedUser(org);
    expect(await statusOnB(org, basicAuth(outsider.user))).toBe(200);
    const before = await sessionCount(org, holder);
    const outsiderBefore = await sessionCount(org, outsider.user);
    expect(await adminCall('DELETE', `${org}/roles/${encodeURIComponent(name)}`)).toBe(204);
    await refusedOnB(org, bearer);
    await loggedInAgainOnB(org, holder, before);
    await settled(org);
    expect(await statusOnB(org, `Bearer ${outsider.tokens.access}`)).toBe(200);
    expect(await statusOnB(org, basicAuth(outsider.user))).toBe(200);
    expect(await sessionCount(org, outsider.user)).toBe(outsiderBefore);
  });

  it("a client deleted (the organization's workspaces client) ends every token carrying one of its roles, and no other", async () => {
    const realm = await createOrganization(['ws']);
    const admin = await keycloakAdmin();
    const [client] = await admin.clients.find({ realm, clientId: `${realm}-workspaces` });
    const holder = (await grant(await createUser(realm, { workspaceRoles: ['ws'] }))).access;
    const outsider = (await servedUser(realm)).tokens.access;
    const onB = async () =>
      (
        await fetch(`${b()}/api/${realm}/workspaces/ws/ita/menu/operation_list/filter/`, {
          headers: { authorization: `Bearer ${holder}` },
        })
      ).status;
    expect(await onB()).toBe(200);
    // The client's roles go with it: the token names a role nobody holds any more.
    expect(await adminCall('DELETE', `${realm}/clients/${client!.id!}`)).toBe(204);
    await expect.poll(onB, EVENTUALLY).toBe(401);
    await settled(realm);
    expect(await statusOnB(realm, `Bearer ${outsider}`)).toBe(200);
  });

  it('a workspace role taken from a composite (the console\'s "Remove associated roles") ends the tokens of the composite\'s holders, and no other', async () => {
    const admin = await keycloakAdmin();
    const [client] = await admin.clients.find({ realm: org, clientId: `${org}-workspaces` });
    const role = await admin.clients.findRole({ realm: org, id: client!.id!, roleName: 'ws' });
    const name = uniqueId('team-');
    await admin.roles.create({ realm: org, name });
    const team = await admin.roles.findOneByName({ realm: org, name });
    const child = [{ id: role!.id!, name: role!.name!, clientRole: true }];
    await admin.roles.createComposite({ realm: org, roleId: team!.id! }, child);
    const holder = await createUser(org);
    await admin.users.addRealmRoleMappings({
      realm: org,
      id: await userIdOf(holder),
      roles: [{ id: team!.id!, name }],
    });
    const holderToken = (await grant(holder)).access;
    const outsider = (await servedUser(org)).tokens.access;
    expect(await workspaceOnB(holderToken)).toBe(200);
    expect(await adminCall('DELETE', `${org}/roles-by-id/${team!.id!}/composites`, child)).toBe(
      204,
    );
    // The token still names `ws`, which its holder no longer has.
    await expect.poll(() => workspaceOnB(holderToken), EVENTUALLY).toBe(401);
    await settled(org);
    expect(await statusOnB(org, `Bearer ${outsider}`)).toBe(200);
  });

  it('a removal from a composite that Keycloak will refuse (no token of the realm or master) costs no read of the roles it names', async () => {
    const named = Array.from({ length: 60 }, () => ({ id: randomUUID() }));
    const path = `${adminUrlA}/auth/admin/realms/${org}/roles-by-id/${randomUUID()}/composites`;
    const send = (authorization?: string, roles: unknown[] = named) =>
      fetch(path, {
        method: 'DELETE',
        headers: {
          'content-type': 'application/json',
          ...(authorization !== undefined && { authorization }),
        },
        body: JSON.stringify(roles),
      });
    const { access: realToken, id: idToken } = (await servedUser(org)).tokens;
    // Signed by a key neither realm has, under a key id of the realm's and under another.
    const claims = { ...claimsOf(realToken), sub: randomUUID() };
    const encode = (json: unknown) => Buffer.from(JSON.stringify(json)).toString('base64url');
    const callers = [
      undefined,
      'Bearer not-a-token',
      `Bearer ${await forged(claims, headerOf(realToken).kid)}`,
      `Bearer ${await forged(claims, 'made-up')}`,
      // A header jose refuses before any key is looked for (an extension it does not know).
      `Bearer ${encode({ alg: 'RS256', crit: ['x'], x: 1 })}.${encode(claims)}.AA`,
      // The realm's own, but no access token: Keycloak's admin API takes none.
      `Bearer ${idToken}`,
    ];
    for (const authorization of callers) {
      const before = await adminCalls(a);
      const res = await send(authorization);
      expect(res.status, `${authorization}: ${await res.text()}`).toBe(401);
      // Before, one read (or two) per named role, as the gateway's own admin calls.
      expect((await adminCalls(a)) - before, authorization).toBeLessThan(5);
    }
    // An administrator's list past the bound is refused before any read.
    const before = await adminCalls(a);
    const tooMany = Array.from({ length: 101 }, () => ({ id: randomUUID() }));
    const res = await send(`Bearer ${await adminToken()}`, tooMany);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: 'invalid_request' });
    expect((await adminCalls(a)) - before).toBeLessThan(5);
  });

  /**
   * A group holding workspace role `ws` and a subgroup of it (which inherits it) with a member
   * whose token B serves on the workspace's route; an outsider's token served too.
   */
  async function inheritingSubgroup() {
    const admin = await keycloakAdmin();
    const { groupId, clientUuid, role, outsider } = await groupWithMembers();
    const name = uniqueId('moved-');
    const { id: movedId } = await admin.groups.createChildGroup(
      { realm: org, id: groupId },
      { name },
    );
    const member = await createUser(org);
    await admin.users.addToGroup({ realm: org, id: await userIdOf(member), groupId: movedId });
    const memberToken = (await grant(member)).access;
    expect(await workspaceOnB(memberToken)).toBe(200);
    return { moved: { id: movedId, name }, clientUuid, role, memberToken, outsider };
  }

  it("a subgroup moved to the top level ends its members' tokens (the roles of its former parent are gone), and no one else's", async () => {
    const { moved, memberToken, outsider } = await inheritingSubgroup();
    expect(await adminCall('POST', `${org}/groups`, moved)).toBe(204);
    await expect.poll(() => workspaceOnB(memberToken), EVENTUALLY).toBe(401);
    await settled(org);
    expect(await workspaceOnB(outsider)).toBe(200);
  });

  it("a subgroup moved under another group ends its members' tokens", async () => {
    const { moved, memberToken } = await inheritingSubgroup();
    const admin = await keycloakAdmin();
    const { id: otherId } = await admin.groups.create({ realm: org, name: uniqueId('other-') });
    expect(await adminCall('POST', `${org}/groups/${otherId}/children`, moved)).toBe(204);
    await expect.poll(() => workspaceOnB(memberToken), EVENTUALLY).toBe(401);
  });

  it("a user's offline consent revoked", async () => {
    const { user, tokens, id } = await servedUser(org, 'openid offline_access');
    const client = apiClientIdOf(user.realm);
    expect(await adminCall('DELETE', `${org}/users/${id}/consents/${client}`)).toBe(204);
    await refusedOnB(org, `Bearer ${tokens.access}`);
  });

  it("a password reset ends the user's cached Basic logins at once, and the wrong passwords remembered of the user", async () => {
    const user = await createUser(org);
    const id = await userIdOf(user);
    expect(await statusOnB(org, basicAuth(user))).toBe(200);
    const password = `${user.password}-new`;
    // A job tried the new password before it was set: the login throttle remembers it as wrong.
    expect(await statusOnB(org, basicAuth({ ...user, password }))).toBe(401);
    const reset = { type: 'password', value: password, temporary: false };
    expect(await adminCall('PUT', `${org}/users/${id}/reset-password`, reset)).toBe(204);
    await refusedOnB(org, basicAuth(user));
    expect(await statusOnB(org, basicAuth({ ...user, password }))).toBe(200);
  });

  it("a password set in the user's representation (the admin API's user update) does the same", async () => {
    const user = await createUser(org);
    const id = await userIdOf(user);
    expect(await statusOnB(org, basicAuth(user))).toBe(200);
    const password = `${user.password}-new`;
    expect(await statusOnB(org, basicAuth({ ...user, password }))).toBe(401);
    const credentials = [{ type: 'password', value: password, temporary: false }];
    expect(await adminCall('PUT', `${org}/users/${id}`, { credentials })).toBe(204);
    await refusedOnB(org, basicAuth(user));
    expect(await statusOnB(org, basicAuth({ ...user, password }))).toBe(200);
  });

  it("an OTP required of a user (the console's required user actions) ends the user's cached Basic logins at once", async () => {
    const user = await createUser(org);
    const id = await userIdOf(user);
    expect(await statusOnB(org, basicAuth(user))).toBe(200);
    // Keycloak refuses the password alone from now on ("Account is not fully set up").
    expect(
      await adminCall('PUT', `${org}/users/${id}`, { requiredActions: ['CONFIGURE_TOTP'] }),
    ).toBe(204);
    await refusedOnB(org, basicAuth(user));
  });

  it("a user's password credential removed ends the user's cached Basic logins at once", async () => {
    const user = await createUser(org);
    const id = await userIdOf(user);
    expect(await statusOnB(org, basicAuth(user))).toBe(200);
    const credentials = await (await keycloakAdmin()).users.getCredentials({ realm: org, id });
    const password = credentials.find((credential) => credential.type === 'password');
    expect(await adminCall('DELETE', `${org}/users/${id}/credentials/${password!.id!}`)).toBe(204);
    await refusedOnB(org, basicAuth(user));
  });

  it("a user's OTP disabled (disable-credential-types) ends the user's cached Basic logins at once", async () => {
    const user = await createUser(org);
    const id = await userIdOf(user);
    expect(await statusOnB(org, basicAuth(user))).toBe(200);
    // Keycloak answers 204 whether the user had one or not; the password still works after.
    const sessions = (await keycloakAdmin()).users.listSessions({ realm: org, id });
    const before = (await sessions).length;
    expect(await adminCall('PUT', `${org}/users/${id}/disable-credential-types`, ['otp'])).toBe(
      204,
    );
    // The cached login is dropped: the next request logs in again (a new Keycloak session).
    await expect
      .poll(async () => {
        expect(await statusOnB(org, basicAuth(user))).toBe(200);
        return (await (await keycloakAdmin()).users.listSessions({ realm: org, id })).length;
      }, EVENTUALLY)
      .toBeGreaterThan(before);
  });

  it("a realm's sessions all ended", async () => {
    const realm = await createOrganization(['ws']);
    const first = await servedUser(realm);
    const second = await servedUser(realm);
    expect(await adminCall('POST', `${realm}/logout-all`)).toBe(200);
    await refusedOnB(realm, `Bearer ${first.tokens.access}`);
    await refusedOnB(realm, `Bearer ${second.tokens.access}`);
  });

  it('a realm\'s not-before set to now (the console\'s "Revocation: Set to now")', async () => {
    const realm = await createOrganization(['ws']);
    const { tokens } = await servedUser(realm);
    // Keycloak refuses tokens whose `iat` is before the not-before, in whole seconds: the
    // second after this token's, as "Set to now" would be a moment later.
    const update = { realm, notBefore: Number(claimsOf(tokens.access).iat) + 1 };
    expect(await adminCall('PUT', realm, update)).toBe(204);
    await refusedOnB(realm, `Bearer ${tokens.access}`);
  });

  it("a realm's not-before set through the console's own realm update (`PUT .../ui-ext`)", async () => {
    const realm = await createOrganization(['ws']);
    const { tokens } = await servedUser(realm);
    const update = { realm, notBefore: Number(claimsOf(tokens.access).iat) + 1 };
    expect(await adminCall('PUT', `${realm}/ui-ext`, update)).toBe(204);
    await refusedOnB(realm, `Bearer ${tokens.access}`);
  });

  it("a workspace role unassigned through the console's own endpoint (`ui-ext/role-mapping-delete`)", async () => {
    const user = await createUser(org, { workspaceRoles: ['ws'] });
    const tokens = await grant(user);
    expect(await statusOnB(org, `Bearer ${tokens.access}`)).toBe(200);
    const id = await userIdOf(user);
    const admin = await keycloakAdmin();
    const [client] = await admin.clients.find({ realm: org, clientId: `${org}-workspaces` });
    const role = await admin.clients.findRole({ realm: org, id: client!.id!, roleName: 'ws' });
    // What Keycloak 26's console sends for "Unassign" on a user's role mapping tab.
    const body = [{ roleId: role!.id!, roleName: 'ws', clientId: `${org}-workspaces` }];
    const path = `${org}/ui-ext/role-mapping-delete/users/${id}`;
    expect(await adminCall('POST', path, body)).toBe(204);
    // The token still names the role it was issued with: it must not be served.
    await refusedOnB(org, `Bearer ${tokens.access}`);
  });

  it("a realm deleted ends its tokens and cached Basic logins (B verifies them with the realm's key set it holds)", async () => {
    const realm = await createOrganization(['ws']);
    const { user, tokens } = await servedUser(realm);
    expect(await statusOnB(realm, basicAuth(user))).toBe(200);
    expect(await adminCall('DELETE', realm)).toBe(204);
    await refusedOnB(realm, `Bearer ${tokens.access}`);
    // Its cached login dropped, B asks Keycloak, which knows the realm no more (502: not an
    // answer a realm gives); kept, it would be served (200) for the cache's hour.
    await expect.poll(() => statusOnB(realm, basicAuth(user)), EVENTUALLY).not.toBe(200);
  });
});

describe('a workspace deleted through the realmgate API ends on every replica what carries its roles', () => {
  it('the tokens and cached Basic logins of its members (directly or through a group), and no others', async () => {
    const realm = await createOrganization(['ws', 'other']);
    const kc = await keycloakAdmin();
    const [client] = await kc.clients.find({ realm, clientId: `${realm}-workspaces` });
    const role = await kc.clients.findRole({ realm, id: client!.id!, roleName: 'ws' });
    const { id: groupId } = await kc.groups.create({ realm, name: uniqueId('team-') });
    await kc.groups.addClientRoleMappings({
      realm,
      id: groupId,
      clientUniqueId: client!.id!,
      roles: [{ id: role!.id!, name: role!.name! }],
    });
    const holder = await createUser(realm, { workspaceRoles: ['ws'] });
    const member = await createUser(realm);
    await kc.users.addToGroup({ realm, id: await userIdOf(member), groupId });
    const outsider = await createUser(realm, { workspaceRoles: ['other'] });
    const bearers: string[] = [];
    for (const user of [holder, member]) bearers.push(`Bearer ${(await grant(user)).access}`);
    const outsiderBearer = `Bearer ${(await grant(outsider)).access}`;
    const sessions = new Map<TestUser, number>();
    for (const user of [holder, member, outsider]) {
      expect(await statusOnB(realm, basicAuth(user))).toBe(200);
      sessions.set(user, await sessionCount(realm, user));
    }
    for (const bearer of [...bearers, outsiderBearer])
      expect(await statusOnB(realm, bearer)).toBe(200);

    const platformAdmin = basicAuth(await createUser('master'));
    const res = await fetch(`${a.url}/api/platform/organizations/${realm}/workspaces/ws`, {
      method: 'DELETE',
      headers: { authorization: platformAdmin },
    });
    expect(res.status).toBe(200);
    for (const bearer of bearers) await refusedOnB(realm, bearer);
    for (const user of [holder, member]) await loggedInAgainOnB(realm, user, sessions.get(user)!);
    await settled(realm);
    expect(await statusOnB(realm, outsiderBearer)).toBe(200);
    expect(await statusOnB(realm, basicAuth(outsider))).toBe(200);
    expect(await sessionCount(realm, outsider)).toBe(sessions.get(outsider));
  });
});

describe('a change to key providers through the admin listener', () => {
  /** Key-set fetches a replica has made so far. */
  const keySetFetches = (replica: Replica) => keycloakCalls(replica, 'jwks');
  const served = async (replica: Replica, token: string) =>
    (
      await fetch(`${replica.url}/api/${org}/platform/workspaces`, {
        headers: { authorization: `Bearer ${token}` },
      })
    ).status;

  it("has the realm's key set fetched again, on every replica", async () => {
    const user = await createUser(org);
    const replicas = [a, replicaB];
    for (const replica of replicas)
      expect(await served(replica, (await grant(user)).access)).toBe(200);
    const before = await Promise.all(replicas.map(keySetFetches));
    // New tokens signed with a key both know: verified from the key sets they hold.
    for (const replica of replicas)
      expect(await served(replica, (await grant(user)).access)).toBe(200);
    expect(await Promise.all(replicas.map(keySetFetches))).toEqual(before);

    const provider = {
      name: 'rsa-added',
      providerId: 'rsa-generated',
      providerType: 'org.keycloak.keys.KeyProvider',
      config: { priority: ['1'], enabled: ['true'], active: ['false'] },
    };
    expect(await adminCall('POST', `${org}/components`, provider)).toBe(201);
    expect(await served(a, (await grant(user)).access)).toBe(200);
    expect(await keySetFetches(a)).toBeGreaterThan(before[0]!);
    // B hears of it over Redis: its next verification, or its refresh, fetches the set.
    await expect
      .poll(async () => {
        expect(await served(replicaB, (await grant(user)).access)).toBe(200);
        return keySetFetches(replicaB);
      }, EVENTUALLY)
      .toBeGreaterThan(before[1]!);
  });
});

/**
 * A replica behind a front that compresses every answer of Keycloak's for a client that accepts
 * it, empty ones too (as a reverse proxy with gzip on for every type may): what the gateway
 * reads of an answer to learn what ended it reads all the same. Port 19446/19447.
 */
describe('behind a front that compresses every answer', () => {
  let front: GzipFront | undefined;
  let c: Replica;

  beforeAll(async () => {
    front = await startGzipFront(
      testEnv().keycloakUrl,
      (answer) => answer.headers['content-encoding'] === undefined,
    );
    c = await startReplica(19446, { ...shared, KEYCLOAK_URL: front.url });
  });
  afterAll(async () => {
    await c?.gateway.close();
    await front?.close();
  });

  it('revoking an access token (RFC 7009) from a client that accepts gzip refuses it on the other replica', async () => {
    const { tokens } = await servedUser(org);
    const res = await fetch(`${c.url}/auth/realms/${org}/protocol/openid-connect/revoke`, {
      method: 'POST',
      headers: { 'accept-encoding': 'gzip' },
      body: new URLSearchParams({ client_id: apiClientIdOf(org), token: tokens.access }),
    });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('');
    await refusedOnB(org, `Bearer ${tokens.access}`);
  });
});
