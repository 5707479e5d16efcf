import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { expectDocumentedFailure } from '../helpers/documented-answer.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import {
  startKeycloakFront,
  type FrontMode,
  type KeycloakFront,
} from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * Short enough for the "too slow" cases, long enough for a password grant through the front on
 * a loaded machine (Keycloak hashes passwords with Argon2).
 */
const TIMEOUT_MS = 3000;

/**
 * The one translation of the gateway's own Keycloak calls, seen on the public API: a replica
 * talks to the real Keycloak through a front that can refuse connections, hang, or answer
 * garbage. Password grants (a new Basic login) and admin-API calls (the refresh-token list, as
 * the gateway's service account) must answer 503, 504 and 502 in the envelope. Each is an answer
 * rather than a hang (one would fail the test by its timeout); how fast is not timed here (the
 * client layer's timeout is proven in test/unit/keycloak/keycloak-calls.test.ts).
 */
describe('Keycloak unreachable, too slow or answering garbage', () => {
  let front: KeycloakFront;
  let replica: Replica;

  beforeAll(async () => {
    front = await startKeycloakFront(testEnv().keycloakUrl);
    replica = await startReplica(18600, {
      KEYCLOAK_URL: front.url,
      KEYCLOAK_TIMEOUT_MS: String(TIMEOUT_MS),
      BASIC_CACHE_MAX_SECONDS: '300',
      LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
    });
  });
  afterAll(async () => {
    await replica?.gateway.close();
    await front?.close();
    await closeTestDb();
  });

  async function get(path: string, user: TestUser) {
    const res = await fetch(`${replica.url}${path}`, {
      headers: { authorization: basicAuth(user) },
    });
    return {
      status: res.status,
      retryAfter: res.headers.get('retry-after'),
      body: (await res.json()) as { data: unknown; result: string },
    };
  }

  const expected: [FrontMode, number, string][] = [
    ['closed', 503, '503-11001'],
    ['hang', 504, '504-11001'],
    ['garbage', 502, '502-11001'],
  ];

  it('a password grant (a Basic login not cached yet)', async () => {
    const user = await createUser('master');
    for (const [mode, status, result] of expected) {
      await front.set(mode);
      const answer = await get('/api/platform/organizations', user);
      expect({ mode, status: answer.status, body: answer.body }).toMatchObject({
        mode,
        status,
        body: { data: null, result },
      });
      expectDocumentedFailure('listOrganizations', answer);
      if (status === 503) expect(answer.retryAfter).toBe('5');
    }
    // Each failure was taken back, not counted as a wrong password: the login now works.
    await front.set('forward');
    expect((await get('/api/platform/organizations', user)).status).toBe(200);
  });

  it('admin-API calls as the service account (the refresh-token list)', async () => {
    const user = await createUser('master');
    const path = '/api/platform/users/_current/refresh_tokens';
    await front.set('forward');
    // The Basic login is cached now, and the service account logged in: from here on only the
    // admin-API requests reach the front.
    expect((await get(path, user)).status).toBe(200);
    for (const [mode, status, result] of expected) {
      await front.set(mode);
      const answer = await get(path, user);
      expect({ mode, status: answer.status, body: answer.body }).toMatchObject({
        mode,
        status,
        body: { data: null, result },
      });
      expectDocumentedFailure('listRefreshTokensMaster', answer);
    }
    await front.set('forward');
    expect((await get(path, user)).status).toBe(200);
  });

  it("the service account's login itself", async () => {
    // A realm the replica has not logged in to yet: the first admin-API step is the login.
    for (const [mode, status, result] of expected) {
      const { realm, user } = await freshOrganizationUser();
      await front.set('forward');
      expect((await get(`/api/${realm}/platform/workspaces`, user)).status).toBe(200);
      await front.set(mode);
      const answer = await get(`/api/${realm}/platform/users/_current/refresh_tokens`, user);
      expect({ mode, status: answer.status, result: answer.body.result }).toEqual({
        mode,
        status,
        result,
      });
      expectDocumentedFailure('listRefreshTokensOrganization', answer);
    }
    await front.set('forward');
  });
});

async function freshOrganizationUser(): Promise<{ realm: string; user: TestUser }> {
  const realm = await createOrganization([]);
  return { realm, user: await createUser(realm) };
}

describe('the /auth proxy when Keycloak is unreachable or too slow', () => {
  let front: KeycloakFront;
  let replica: Replica;

  beforeAll(async () => {
    front = await startKeycloakFront(testEnv().keycloakUrl);
    replica = await startReplica(18610, {
      KEYCLOAK_URL: front.url,
      AUTH_PROXY_TIMEOUT_MS: String(TIMEOUT_MS),
    });
  });
  afterAll(async () => {
    await replica?.gateway.close();
    await front?.close();
  });

  const grant = () =>
    fetch(`${replica.url}/auth/realms/master/protocol/openid-connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'client_id=_platform-api&grant_type=password&username=a&password=b',
    });

  it('answers 504 504-11001 when Keycloak is too slow', async () => {
    await front.set('hang');
    const res = await grant();
    expect({ status: res.status, body: await res.json() }).toMatchObject({
      status: 504,
      body: { data: null, result: '504-11001' },
    });
  });

  it('answers 503 503-11001 with Retry-After', async () => {
    await front.set('closed');
    const res = await grant();
    expect(res.headers.get('retry-after')).toBe('5');
    expect({ status: res.status, body: await res.json() }).toMatchObject({
      status: 503,
      body: { data: null, result: '503-11001' },
    });
  });
});
