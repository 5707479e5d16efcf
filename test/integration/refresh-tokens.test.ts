import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, callApi } from '../helpers/api.ts';
import {
  claimsOf,
  createUser,
  disableUser,
  createPublicClient,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  sessionCount,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';

const YEAR_MS = 31536000 * 1000;

interface Grant {
  refreshToken: string;
  accessToken: string;
  sessionId: string;
}

/** The spec's password grant with offline_access, through the gateway. */
async function offlineGrant(user: TestUser): Promise<Grant> {
  const { status, json } = await postToken(
    `${testEnv().publicUrl}/auth`,
    user.realm,
    passwordGrantBody(user),
  );
  expect(status).toBe(200);
  return {
    refreshToken: String(json.refresh_token),
    accessToken: String(json.access_token),
    sessionId: String(claimsOf(json.access_token).sid),
  };
}

async function refreshGrant(user: TestUser, refreshToken: string) {
  const client = user.realm === 'master' ? '_platform-api' : `_${user.realm}-api`;
  return postToken(
    `${testEnv().publicUrl}/auth`,
    user.realm,
    `client_id=${client}&grant_type=refresh_token&refresh_token=${refreshToken}`,
  );
}

const tokensPath = (user: TestUser) =>
  user.realm === 'master'
    ? '/api/platform/users/_current/refresh_tokens'
    : `/api/${user.realm}/platform/users/_current/refresh_tokens`;
const listPath = (user: TestUser) =>
  user.realm === 'master'
    ? '/api/platform/organizations'
    : `/api/${user.realm}/platform/workspaces`;
const bearer = (grant: Grant) => `Bearer ${grant.accessToken}`;

describe('refresh-token management (spec 4.5, 4.6)', () => {
  let org: string;
  afterAll(closeTestDb);
  beforeAll(async () => {
    org = await createOrganization(['ws']);
  });

  it("lists the caller's sessions with timestamps computed from the realm settings", async () => {
    for (const realm of ['master', org]) {
      const user = await createUser(realm);
      const before = Date.now();
      await offlineGrant(user);
      await offlineGrant(user);
      const other = await createUser(realm);
      await offlineGrant(other);

      for (const authorization of [basicAuth(user), bearer(await offlineGrant(user))]) {
        const res = await callApi(tokensPath(user), authorization);
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({ message: 'SUCCESS', result: '000-00000' });
        const records = res.body.data as Array<Record<string, string>>;
        expect(records).toHaveLength(3);
        for (const record of records) {
          // Spec 2.3's fields, then the gateway's (job credentials): none given at issuance.
          expect(Object.keys(record).sort()).toEqual([
            'dpop_jkt',
            'expire_timestamp',
            'id',
            'last_use',
            'lastaccess_timestamp',
            'name',
            'read_only',
            'start_timestamp',
            'workspaces',
          ]);
          expect(record).toMatchObject({
            name: null,
            workspaces: null,
            read_only: false,
            dpop_jkt: null,
          });
          for (const field of ['start_timestamp', 'lastaccess_timestamp', 'expire_timestamp']) {
            expect(record[field]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
          }
          const start = Date.parse(record.start_timestamp!);
          expect(start).toBeGreaterThanOrEqual(before - 2000);
          expect(start).toBeLessThanOrEqual(Date.now());
          // Idle = max = 365 days: the max lifespan from the start comes first.
          expect(Date.parse(record.expire_timestamp!)).toBe(start + YEAR_MS);
        }
      }
    }
  });

  it('does not list sessions of another client of the realm', async () => {
    await createPublicClient(org, 'other-app', { optionalClientScopes: ['offline_access'] });
    const user = await createUser(org);
    const res = await fetch(
      `${testEnv().publicUrl}/auth/realms/${org}/protocol/openid-connect/token`,
      {
        method: 'POST',
        body: new URLSearchParams({
          client_id: 'other-app',
          grant_type: 'password',
          scope: 'openid offline_access',
          username: user.username,
          password: user.password,
        }),
      },
    );
    expect(res.status).toBe(200);
    const listed = await callApi(tokensPath(user), basicAuth(user));
    expect(listed.body.data).toEqual([]);
  });

  it('revokes every refresh token at once; their access tokens stop working immediately', async () => {
    const user = await createUser(org);
    const first = await offlineGrant(user);
    const second = await offlineGrant(user);
    expect((await callApi(listPath(user), bearer(first))).status).toBe(200);

    const res = await callApi(tokensPath(user), basicAuth(user), { method: 'DELETE' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ data: null, message: 'SUCCESS', result: '000-00000' });

    for (const grant of [first, second]) {
      const refreshed = await refreshGrant(user, grant.refreshToken);
      expect(refreshed.status).toBe(400);
      expect(refreshed.json.error).toBe('invalid_grant');
      const call = await callApi(listPath(user), bearer(grant));
      expect(call.status).toBe(401);
      expect(call.body).toMatchObject({ result: '401-00002', message: 'Token has been revoked.' });
    }
    expect((await callApi(tokensPath(user), basicAuth(user))).body.data).toEqual([]);

    const again = await offlineGrant(user);
    expect((await callApi(listPath(user), bearer(again))).status).toBe(200);
    expect((await refreshGrant(user, again.refreshToken)).status).toBe(200);
  });

  it('revokes the refresh tokens of grants without offline_access too (spec 4.6: every one)', async () => {
    const user = await createUser(org);
    const client = `_${org}-api`;
    const { status, json } = await postToken(
      `${testEnv().publicUrl}/auth`,
      org,
      `client_id=${client}&grant_type=password&scope=openid` +
        `&username=${user.username}&password=${encodeURIComponent(user.password)}`,
    );
    expect(status).toBe(200);
    expect(claimsOf(json.refresh_token).typ).toBe('Refresh');
    const online: Grant = {
      refreshToken: String(json.refresh_token),
      accessToken: String(json.access_token),
      sessionId: String(claimsOf(json.access_token).sid),
    };
    expect((await callApi(listPath(user), bearer(online))).status).toBe(200);

    const res = await callApi(tokensPath(user), basicAuth(user), { method: 'DELETE' });
    expect(res.status).toBe(200);

    const refreshed = await refreshGrant(user, online.refreshToken);
    expect(refreshed.status).toBe(400);
    expect(refreshed.json.error).toBe('invalid_grant');
    const call = await callApi(listPath(user), bearer(online));
    expect(call.status).toBe(401);
    expect(call.body).toMatchObject({ result: '401-00002' });
  });

  it("drops the user's cached Basic logins, so the next Basic call logs in again", async () => {
    const user = await createUser(org);
    const sessions = () => sessionCount(user);
    expect((await callApi(listPath(user), basicAuth(user))).status).toBe(200);
    expect((await callApi(listPath(user), basicAuth(user))).status).toBe(200);
    expect(await sessions()).toBe(1);
    expect((await callApi(tokensPath(user), basicAuth(user), { method: 'DELETE' })).status).toBe(
      200,
    );
    expect((await callApi(listPath(user), basicAuth(user))).status).toBe(200);
    // The cached login's session ended with the rest (it holds the API client); the call
    // after opened a new one.
    expect(await sessions()).toBe(1);
  });

  it('revokes one refresh token and leaves the others working', async () => {
    const user = await createUser(org);
    const kept = await offlineGrant(user);
    const revoked = await offlineGrant(user);

    const res = await callApi(`${tokensPath(user)}/${revoked.sessionId}`, bearer(kept), {
      method: 'DELETE',
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toBeNull();

    expect((await refreshGrant(user, revoked.refreshToken)).status).toBe(400);
    expect((await callApi(listPath(user), bearer(revoked))).status).toBe(401);
    expect((await refreshGrant(user, kept.refreshToken)).status).toBe(200);
    expect((await callApi(listPath(user), bearer(kept))).status).toBe(200);
    const ids = (await callApi(tokensPath(user), basicAuth(user))).body.data as Array<{
      id: string;
    }>;
    expect(ids.map((r) => r.id)).toEqual([kept.sessionId]);
  });

  it("answers 404 for another user's session id, and leaves that session alone", async () => {
    const owner = await createUser(org);
    const prober = await createUser(org);
    const target = await offlineGrant(owner);
    for (const id of [target.sessionId, 'no-such-session']) {
      const res = await callApi(`${tokensPath(prober)}/${id}`, basicAuth(prober), {
        method: 'DELETE',
      });
      expect(res.status).toBe(404);
      expect(res.body).toMatchObject({ data: null, result: '404-30001' });
    }
    expect((await refreshGrant(owner, target.refreshToken)).status).toBe(200);
  });
});

describe('revocation across replicas and from outside the gateway', () => {
  let org: string;
  let replicas: Replica[] = [];
  beforeAll(async () => {
    org = await createOrganization(['ws']);
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.gateway.close()));
    replicas = [];
    await closeTestDb();
  });

  async function status(baseUrl: string, authorization: string): Promise<number> {
    const res = await fetch(`${baseUrl}/api/${org}/platform/workspaces`, {
      headers: { authorization },
    });
    return res.status;
  }

  // How fast the other replica learns it is the HA suite's figure and bound (test/ha/ha.test.ts:
  // within 1 s, under load); here the event is awaited.
  it('a revocation through one replica is enforced by another', async () => {
    const replica = await startReplica(18400, {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: testEnv().redisKeyPrefix,
    });
    replicas.push(replica);
    const user = await createUser(org);
    const grant = await offlineGrant(user);
    // The main gateway (another process) has verified and cached the token.
    expect(await status(testEnv().publicUrl, bearer(grant))).toBe(200);

    const res = await fetch(`${replica.url}/api/${org}/platform/users/_current/refresh_tokens`, {
      method: 'DELETE',
      headers: { authorization: bearer(grant) },
    });
    expect(res.status).toBe(200);
    await expect.poll(() => status(testEnv().publicUrl, bearer(grant)), EVENTUALLY).toBe(401);
  });

  // The bound itself (refused on the first request once the check due after 2 s has answered)
  // is proven on an injected clock in test/unit/auth/bearer/active-check.test.ts. Here, against the real
  // Keycloak: the refusal comes, and from the background re-check (with the default 60 s it could
  // not come within the wait).
  it("with REVOCATION_CHECK_SECONDS=2, a disabled user's token is refused once the re-check has asked Keycloak", async () => {
    const replica = await startReplica(18410, { REVOCATION_CHECK_SECONDS: '2' });
    replicas.push(replica);
    const user = await createUser(org);
    const grant = await offlineGrant(user);
    expect(await status(replica.url, bearer(grant))).toBe(200);

    await disableUser(user);
    await expect
      .poll(() => status(replica.url, bearer(grant)), { ...EVENTUALLY, interval: 200 })
      .toBe(401);
    const metrics = await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/metrics`);
    expect(await metrics.text()).toMatch(
      /^realmgate_token_rechecks_total\{event="inactive"\} [1-9]/m,
    );
  });

  it("with REVOCATION_CHECK_SECONDS=0, a disabled user's token is refused on the next request", async () => {
    const replica = await startReplica(18412, { REVOCATION_CHECK_SECONDS: '0' });
    replicas.push(replica);
    const user = await createUser(org);
    const grant = await offlineGrant(user);
    expect(await status(replica.url, bearer(grant))).toBe(200);

    await disableUser(user);
    expect(await status(replica.url, bearer(grant))).toBe(401);
  });
});

/**
 * A refresh token issued while a DELETE of them all is under way (after the gateway read the
 * user's sessions, before it ended them in Keycloak): made certain by a front that holds
 * Keycloak's answer to that read. Whatever becomes of it, its access tokens go with its refresh
 * token: none outlives a refresh token Keycloak no longer honours. Port 18420.
 */
describe('revoking them all while another is being issued', () => {
  let org: string;
  let front: KeycloakFront;
  let replica: Replica;
  beforeAll(async () => {
    org = await createOrganization(['ws']);
    front = await startKeycloakFront(testEnv().keycloakUrl);
    replica = await startReplica(18420, { KEYCLOAK_URL: front.url });
  });
  afterAll(async () => {
    await replica?.gateway.close();
    await front?.close();
    await closeTestDb();
  });

  async function works(grant: Grant, user: TestUser) {
    const api = await fetch(`${replica.url}/api/${org}/platform/workspaces`, {
      headers: { authorization: bearer(grant) },
    });
    const refreshed = await refreshGrant(user, grant.refreshToken);
    return { access: api.status, refresh: refreshed.status };
  }

  it('the access tokens of a refresh token Keycloak ended are refused', async () => {
    const user = await createUser(org);
    const before = await offlineGrant(user);
    const read = front.gate(/\/offline-sessions\//);
    const deleting = fetch(`${replica.url}${tokensPath(user)}`, {
      method: 'DELETE',
      headers: { authorization: basicAuth(user) },
    });
    await read.reached;
    const during = await offlineGrant(user);
    // A job uses it at once: the replica has verified it, and asked Keycloak whether it is active.
    const used = await fetch(`${replica.url}/api/${org}/platform/workspaces`, {
      headers: { authorization: bearer(during) },
    });
    expect(used.status).toBe(200);
    read.open();
    expect((await deleting).status).toBe(200);

    expect(await works(before, user)).toEqual({ access: 401, refresh: 400 });
    // Issued during the call, it may live on or end; either way as one.
    const { access, refresh } = await works(during, user);
    expect(access === 200, `access ${access}, refresh ${refresh}`).toBe(refresh === 200);
  });

  it('revoking one that Keycloak ended after the gateway read it: done, and its access tokens refused', async () => {
    const user = await createUser(org);
    const target = await offlineGrant(user);
    // In use on the replica: verified, and asked of Keycloak once (not again for a minute).
    expect((await works(target, user)).access).toBe(200);
    const read = front.gate(/\/offline-sessions\//);
    const deleting = fetch(`${replica.url}${tokensPath(user)}/${target.sessionId}`, {
      method: 'DELETE',
      headers: { authorization: basicAuth(user) },
    });
    await read.reached;
    // Ended meanwhile (another revocation, a logout): Keycloak's delete will find nothing.
    const admin = await keycloakAdmin();
    await admin.realms.deleteSession({ realm: org, session: target.sessionId, isOffline: true });
    read.open();
    const answer = await deleting;
    expect(answer.status).toBe(200);
    expect(await works(target, user)).toEqual({ access: 401, refresh: 400 });
  });
});

describe('Keycloak admin API failures map to result codes', () => {
  let org: string;
  const replicas: Replica[] = [];
  beforeAll(async () => {
    org = await createOrganization(['ws']);
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.gateway.close()));
    await closeTestDb();
  });

  async function removeGatewayRole(role: string): Promise<void> {
    const admin = await keycloakAdmin();
    const serviceAccount = await admin.users.find({
      realm: org,
      username: 'service-account-realmgate-gateway',
      exact: true,
    });
    const [management] = await admin.clients.find({ realm: org, clientId: 'realm-management' });
    const found = await admin.clients.findRole({ realm: org, id: management!.id!, roleName: role });
    await admin.users.delClientRoleMappings({
      realm: org,
      id: serviceAccount[0]!.id!,
      clientUniqueId: management!.id!,
      roles: [{ id: found!.id!, name: role }],
    });
  }

  /** Starts a replica as configured now (its service token carries the roles as they are now). */
  async function freshReplica(port: number, overrides: Record<string, string> = {}) {
    const replica = await startReplica(port, overrides);
    replicas.push(replica);
    return replica;
  }

  /** Calls the refresh-token endpoint on a replica and checks status and result code. */
  async function expectAnswer(
    replica: Replica,
    method: string,
    user: TestUser,
    status: number,
    result: string,
  ) {
    const res = await fetch(`${replica.url}/api/${org}/platform/users/_current/refresh_tokens`, {
      method,
      headers: { authorization: basicAuth(user) },
    });
    expect(res.status).toBe(status);
    expect(await res.json()).toMatchObject({ data: null, result });
  }

  it('answers 401-00001 when the gateway cannot get its service token', async () => {
    const replica = await freshReplica(18420, {
      KEYCLOAK_CLIENT_SECRET: 'definitely-not-the-secret',
    });
    await expectAnswer(replica, 'GET', await createUser(org), 401, '401-00001');
  });

  it("challenges that 401 as every /api 401 is: the API's schemes, and no error of the client's", async () => {
    const replica = await freshReplica(18460, {
      KEYCLOAK_CLIENT_SECRET: 'definitely-not-the-secret',
    });
    const res = await fetch(`${replica.url}/api/${org}/platform/users/_current/refresh_tokens`, {
      headers: { authorization: basicAuth(await createUser(org)) },
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ data: null, result: '401-00001' });
    // RFC 7235 section 3.1: a 401 carries at least one challenge; RFC 6750 section 3: none
    // names an error when the client's credentials are not what failed.
    const challenge = res.headers.get('www-authenticate') ?? '';
    const metadata = `resource_metadata="${testEnv().publicUrl}/.well-known/oauth-protected-resource/api/${org}"`;
    expect(challenge).toContain(`Bearer realm="${org}", ${metadata}`);
    expect(challenge).toContain(`DPoP realm="${org}"`);
    expect(challenge).toContain(`Basic realm="${org}"`);
    expect(challenge).not.toContain('error=');
  });

  it('answers 500-30001 when revoking fails, 400-30002 when the realm and 400-30001 when the sessions cannot be read', async () => {
    const user = await createUser(org);
    await offlineGrant(user);
    await removeGatewayRole('manage-users');
    await expectAnswer(await freshReplica(18430), 'DELETE', user, 500, '500-30001');
    await removeGatewayRole('view-realm');
    await expectAnswer(await freshReplica(18450), 'GET', user, 400, '400-30002');
    await removeGatewayRole('view-users');
    await expectAnswer(await freshReplica(18440), 'GET', user, 400, '400-30001');
  });
});
