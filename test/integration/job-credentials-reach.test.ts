import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  claimsOf,
  createUser,
  madeUpToken,
  passwordGrantBody,
  postToken,
  type TestUser,
} from '../helpers/keycloak.ts';
import { grantReaderRole } from '../helpers/audit-readers.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * A job credential's reach beyond the workspace routes of `/api`. On `/auth`: its tokens carry
 * the `account` audience and roles of the organization's users, so through the gateway's `/auth`
 * they reach Keycloak's Account REST API, where a write would sign the user out everywhere,
 * change the profile or end every offline session. A read-only token may read there only; a
 * workspace-narrowed one not at all; one past its lifetime is refused as on `/api`. And the
 * organization's audit log, which is the whole organization's: none of it for a token narrowed
 * to workspaces; nor its user's other refresh tokens on `/api` (it lists and ends its own). The
 * test gateway and the real Keycloak.
 */
const BEYOND_WORKSPACES =
  "This token reaches its workspaces only, not its user's account nor the whole organization.";

describe('job credentials: their reach on /auth (Keycloak account API) and the audit log', () => {
  let org: string;
  let user: TestUser;

  beforeAll(async () => {
    org = await createOrganization(['ws1', 'ws2'], 1);
    user = await createUser(org, { workspaceRoles: ['ws1', 'ws2'] });
  });

  afterAll(async () => {
    await closeTestDb();
  });

  const auth = () => `${testEnv().publicUrl}/auth`;
  const account = (path = '') => `${auth()}/realms/${org}/account${path}`;

  async function grant(extra: string, scope = 'openid+offline_access', who = user) {
    const body = passwordGrantBody(who, extra).replace('openid+offline_access', scope);
    const res = await postToken(auth(), org, body);
    expect(res.status).toBe(200);
    return res.json;
  }

  async function refresh(refreshToken: unknown) {
    return postToken(
      auth(),
      org,
      `client_id=_${org}-api&grant_type=refresh_token&refresh_token=${String(refreshToken)}`,
    );
  }

  /** A job credential as a job uses it: issued, then refreshed; the refreshed access token. */
  async function jobToken(extra: string) {
    const issued = await grant(extra);
    const refreshed = await refresh(issued.refresh_token);
    expect(refreshed.status).toBe(200);
    return String(refreshed.json.access_token);
  }

  async function call(url: string, token: string, method = 'GET', body?: unknown) {
    const res = await fetch(url, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return {
      status: res.status,
      // An export's JSON Lines are no one document: only JSON answers are read.
      json: (res.headers.get('content-type')?.startsWith('application/json')
        ? JSON.parse(text)
        : {}) as Record<string, unknown>,
      wwwAuthenticate: res.headers.get('www-authenticate'),
    };
  }

  /** A profile as the account console sends it: every attribute Keycloak requires. */
  const filledIn = (profile: Record<string, unknown>, firstName: string) => ({
    ...profile,
    firstName,
    lastName: 'Job',
    email: `${user.username}@example.com`,
  });

  it('a read-only token reads the account but cannot sign out, edit the profile or end consent', async () => {
    // The user's other sessions: an interactive login (online) and another job (offline).
    const interactive = await grant('', 'openid');
    const otherJob = await grant('&realmgate_name=other-job');
    const token = await jobToken('&realmgate_name=read-only-job&realmgate_read_only=true');

    const profile = await call(account('/'), token);
    expect(profile.status).toBe(200);
    expect(profile.json.username).toBe(user.username);
    expect((await call(account('/sessions'), token)).status).toBe(200);

    const refusedWrites: Array<[string, string, unknown?]> = [
      ['DELETE', account('/sessions')],
      ['DELETE', account('/sessions?current=true')],
      ['POST', account('/'), filledIn(profile.json, 'Changed')],
      ['DELETE', account(`/applications/_${org}-api/consent`)],
    ];
    for (const [method, url, body] of refusedWrites) {
      const res = await call(url, token, method, body);
      expect(res.status, `${method} ${url}`).toBe(403);
      expect(res.json, `${method} ${url}`).toEqual({
        error: 'insufficient_scope',
        error_description: 'This token is read-only: only GET, HEAD and OPTIONS.',
      });
    }

    // Nothing changed: the profile, and every other session still refreshes.
    expect((await call(account('/'), token)).json.firstName).toBe(profile.json.firstName);
    expect((await refresh(interactive.refresh_token)).status).toBe(200);
    expect((await refresh(otherJob.refresh_token)).status).toBe(200);
  });

  it('a workspace-narrowed token does not reach the account at all', async () => {
    const token = await jobToken('&realmgate_name=ws1-job&realmgate_workspaces=ws1');
    for (const method of ['GET', 'DELETE']) {
      const res = await call(account('/sessions'), token, method);
      expect(res.status, method).toBe(403);
      expect(res.json, method).toEqual({
        error: 'insufficient_scope',
        error_description: 'This token reaches its workspaces only, not the account.',
      });
    }
  });

  it("a narrowed token is refused however Keycloak's userinfo would take it (header, form, query)", async () => {
    const narrowed = await jobToken('&realmgate_name=ws1-userinfo&realmgate_workspaces=ws1');
    const readOnly = await jobToken('&realmgate_name=ro-userinfo&realmgate_read_only=true');
    const userinfo = `${auth()}/realms/${org}/protocol/openid-connect/userinfo`;
    const inForm = (token: string) =>
      fetch(userinfo, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ access_token: token }).toString(),
      });
    const outside = {
      error: 'insufficient_scope',
      error_description: 'This token reaches its workspaces only, not the account.',
    };
    expect([(await call(userinfo, narrowed)).status]).toEqual([403]);
    const form = await inForm(narrowed);
    expect([form.status, await form.json()]).toEqual([403, outside]);
    // A read-only token's POST is refused in the form as in the header.
    expect((await call(userinfo, readOnly, 'POST')).status).toBe(403);
    expect((await inForm(readOnly)).status).toBe(403);
    // In the query, Keycloak takes no token: never the profile.
    const query = await fetch(`${userinfo}?access_token=${narrowed}`);
    expect(query.status).toBe(401);
    // An unrestricted token in the form still gets the profile.
    const full = await inForm(await jobToken('&realmgate_name=full-userinfo'));
    expect([
      full.status,
      ((await full.json()) as { preferred_username: string }).preferred_username,
    ]).toEqual([200, user.username]);
  });

  it('a narrowed token is refused as the subject or actor of a token exchange', async () => {
    // RFC 8693: an exchange turns the token it names into another, of a session Keycloak may not
    // keep (no `sid`, no reach): held to its reach as a token the request carries.
    const narrowed = await jobToken('&realmgate_name=ws1-exchange&realmgate_workspaces=ws1');
    const readOnly = await jobToken('&realmgate_name=ro-exchange&realmgate_read_only=true');
    const exchange = (field: 'subject_token' | 'actor_token', token: string) =>
      postToken(
        auth(),
        org,
        new URLSearchParams({
          client_id: `_${org}-api`,
          grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
          subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
          [field]: token,
          ...(field === 'actor_token'
            ? { actor_token_type: 'urn:ietf:params:oauth:token-type:access_token' }
            : {}),
        }).toString(),
      );
    for (const field of ['subject_token', 'actor_token'] as const) {
      for (const token of [narrowed, readOnly]) {
        const res = await exchange(field, token);
        expect([field, res.status, res.json.error]).toEqual([field, 403, 'insufficient_scope']);
      }
    }
    // An unrestricted token is left to Keycloak (which exchanges nothing for a public client).
    const full = await exchange('subject_token', await jobToken('&realmgate_name=full-exchange'));
    expect(full.json.error).not.toBe('insufficient_scope');
  });

  it('a token past its lifetime is refused as an expired token', async () => {
    // Issued, never used: the gateway has not read its reach yet, so it reads the one changed
    // below (as a replica that never saw the session would).
    const issued = await grant('&realmgate_name=late-job&realmgate_expires_in=60');
    const token = String(issued.access_token);
    const sessionId = String(claimsOf(token).sid);
    await testDb()
      .table('refresh_token_details')
      .where({ session_id: sessionId })
      .update({ expires_at: new Date(Date.now() - 1000) });
    const res = await call(account('/'), token);
    expect([res.status, res.json.error]).toEqual([401, 'invalid_token']);
    expect(res.wwwAuthenticate).toMatch(/^Bearer .*error="invalid_token"/);
  });

  it("a forged token naming no session Keycloak could have is left to Keycloak's refusal", async () => {
    // A `sid` PostgreSQL cannot hold as text (a NUL): never looked up, so no 500 or 503.
    const refreshed = await refresh(madeUpToken({ typ: 'Refresh', sid: 'a\u0000b', sub: 'x' }));
    expect([refreshed.status, refreshed.json.error]).toEqual([400, 'invalid_grant']);
    const profile = await call(account('/'), madeUpToken({ typ: 'Bearer', sid: '\u0000' }));
    expect(profile.status).toBe(401);
    // A header of many made-up tokens is one refusal, not a lookup each.
    const many = Array.from({ length: 200 }, (_, i) =>
      madeUpToken({ typ: 'Bearer', sid: `s-${i}` }),
    );
    const flood = await call(account('/'), many.join(', '));
    expect([flood.status, flood.json.error]).toEqual([400, 'invalid_request']);
  });

  it('an unrestricted token and an interactive login use the account API as before', async () => {
    const job = await jobToken('&realmgate_name=full-job');
    const interactive = String((await grant('', 'openid')).access_token);
    for (const token of [job, interactive]) {
      const profile = await call(account('/'), token);
      expect(profile.status).toBe(200);
      const edited = await call(account('/'), token, 'POST', filledIn(profile.json, 'Ed'));
      expect(edited.status).toBe(204);
    }
  });
  it("a narrowed token lists and ends its own refresh token on /api, none of its user's others", async () => {
    const otherJob = await grant('&realmgate_name=ws2-neighbour&realmgate_workspaces=ws2');
    const otherId = String(claimsOf(String(otherJob.access_token)).sid);
    const token = await jobToken('&realmgate_name=ws1-self&realmgate_workspaces=ws1');
    const ownId = String(claimsOf(token).sid);
    const tokens = `${testEnv().publicUrl}/api/${org}/platform/users/_current/refresh_tokens`;

    const listed = await call(tokens, token);
    expect(listed.status).toBe(200);
    expect(listed.json.data).toEqual([expect.objectContaining({ id: ownId, name: 'ws1-self' })]);
    // The neighbour's record outlives a list that does not show it (a job credential without
    // its record would reach all its user may).
    const neighbourRow = testDb().table('refresh_token_details').where({ session_id: otherId });
    expect(await neighbourRow.first()).toMatchObject({ name: 'ws2-neighbour' });
    // Its user's own login lists both.
    const full = String((await grant('', 'openid')).access_token);
    const ids = ((await call(tokens, full)).json.data as Array<{ id: string }>).map((t) => t.id);
    expect(ids).toEqual(expect.arrayContaining([ownId, otherId]));

    for (const url of [tokens, `${tokens}/${otherId}`, `${tokens}/ws2-neighbour`]) {
      const refused = await call(url, token, 'DELETE');
      expect(refused.status, url).toBe(403);
      expect(refused.json, url).toMatchObject({ result: '403-30001', message: BEYOND_WORKSPACES });
    }
    expect((await refresh(otherJob.refresh_token)).status).toBe(200);

    expect((await call(`${tokens}/${ownId}`, token, 'DELETE')).status).toBe(200);
    expect((await call(tokens, token)).status).toBe(401);
    expect((await refresh(otherJob.refresh_token)).status).toBe(200);
  });

  it("a reader's token narrowed to workspaces reads none of the organization's audit log", async () => {
    const reader = await createUser(org, { workspaceRoles: ['ws1', 'ws2'] });
    await grantReaderRole(reader);
    const full = String((await grant('', 'openid', reader)).access_token);
    const narrowed = String(
      (await grant('&realmgate_name=ws1-reader&realmgate_workspaces=ws1', 'openid', reader))
        .access_token,
    );
    const api = `${testEnv().publicUrl}/api/${org}/platform`;
    for (const path of [
      '/audit-log',
      '/audit-log/export',
      '/audit-log/retention',
      '/auditlog/download',
    ]) {
      expect((await call(`${api}${path}`, full)).status, path).toBe(200);
      const refused = await call(`${api}${path}`, narrowed);
      expect(refused.status, path).toBe(403);
      expect(refused.json, path).toMatchObject({
        result: '403-30001',
        message: BEYOND_WORKSPACES,
      });
    }
    // Its workspaces are still its own.
    const workspaces = await call(`${api}/workspaces`, narrowed);
    expect(workspaces.status).toBe(200);
  });
});
