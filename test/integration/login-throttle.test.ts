import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { dpopKey, dpopProof } from '../helpers/dpop.ts';
import {
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  recordFailedLogins,
  uniqueId,
  userIdOf,
  wrongPasswordsChecked,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * Failed Basic logins are throttled per (account, client address) and per client address,
 * shared between replicas through Redis, without Keycloak seeing the refused attempts:
 * Keycloak's own brute-force count (the realm template turns detection on) shows what reached
 * it. Clients are told apart by X-Forwarded-For from a trusted 127.0.0.1 here; the
 * login-throttle-addresses suite uses real source addresses.
 */
describe('login throttle (429 429-00001) against the real Keycloak', () => {
  let replicas: Replica[] = [];
  let org: string;
  const path = () => `/api/${org}/platform/workspaces`;

  beforeAll(async () => {
    const shared = {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}throttle:`,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
      // The tests speak for several clients through X-Forwarded-For from a trusted 127.0.0.1.
      TRUSTED_PROXIES: '127.0.0.1',
      LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS: '3',
      LOGIN_MAX_FAILURES_PER_ADDRESS: '6',
      LOGIN_FAILURE_WINDOW_SECONDS: '120',
    };
    replicas = [await startReplica(18500, shared), await startReplica(18510, shared)];
    org = await createOrganization(['ws1']);
    await recordFailedLogins(org);
  });

  afterAll(async () => {
    await Promise.all(replicas.map((replica) => replica.gateway.close()));
    await closeTestDb();
  });

  async function call(replica: Replica, user: TestUser, address: string, password = user.password) {
    const res = await fetch(`${replica.url}${path()}`, {
      headers: {
        authorization: basicAuth({ ...user, password }),
        'x-forwarded-for': address,
      },
    });
    const body = (await res.json()) as { result: string };
    return { status: res.status, result: body.result, retryAfter: res.headers.get('retry-after') };
  }

  it('refuses an account from an address past its limit, on every replica, without Keycloak; other addresses go on', async () => {
    const user = await createUser(org);
    for (let i = 0; i < 3; i++) {
      expect(await call(replicas[0]!, user, '203.0.113.1', `wrong-${i}`)).toMatchObject({
        status: 401,
        result: '401-00002',
      });
    }
    const failuresSeen = await wrongPasswordsChecked(user);
    expect(failuresSeen).toBeGreaterThan(0);
    const refused = await call(replicas[0]!, user, '203.0.113.1');
    expect(refused).toMatchObject({ status: 429, result: '429-00001' });
    expect(Number(refused.retryAfter)).toBeGreaterThan(0);
    expect(Number(refused.retryAfter)).toBeLessThanOrEqual(120);
    expect(await call(replicas[1]!, user, '203.0.113.1')).toMatchObject({ status: 429 });
    expect(await call(replicas[1]!, user, '203.0.113.1', 'wrong-again')).toMatchObject({
      status: 429,
    });
    expect(await wrongPasswordsChecked(user)).toBe(failuresSeen);
    expect(await call(replicas[1]!, user, '203.0.113.2')).toMatchObject({ status: 200 });
  });

  it('remembers a refused password: a client looping on it costs one Keycloak check and one failure', async () => {
    const user = await createUser(org);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      statuses.push(
        (await call(replicas[i % 2]!, user, '203.0.113.3', 'same-wrong-password')).status,
      );
    }
    // Answered from memory, as the first time, on either replica; counted once, so the
    // account's right password from the same address still goes through.
    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    expect(await wrongPasswordsChecked(user)).toBe(1);
    expect((await call(replicas[0]!, user, '203.0.113.3')).status).toBe(200);
  });

  it('throttles the token endpoint however its path is spelled, as Keycloak serves them all', async () => {
    const user = await createUser(org);
    const base = `${replicas[0]!.url}/auth/realms/${org}/protocol/openid-connect`;
    const grant = (url: string, password: string) =>
      fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          // A private address: Keycloak refuses plain HTTP to a public one ("HTTPS required").
          'x-forwarded-for': '10.9.8.7',
        },
        body: passwordGrantBody({ ...user, password }),
      });
    // Keycloak serves the token endpoint with a trailing slash too: a token, not a 404.
    const issued = await grant(`${base}/token/`, user.password);
    expect(issued.status).toBe(200);
    expect(((await issued.json()) as { access_token?: string }).access_token).toBeTruthy();
    const statuses: number[] = [];
    for (const [i, url] of [`${base}/token/`, `${base}/%74oken`, `${base}/token/`].entries()) {
      statuses.push((await grant(url, `wrong-${i}`)).status);
    }
    expect(statuses).toEqual([401, 401, 401]);
    // The limit (3 per account and address) holds across the spellings, without Keycloak.
    const refused = await grant(`${base}/token`, 'wrong-again');
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error?: string }).error).toBe('too_many_attempts');
    expect(await wrongPasswordsChecked(user)).toBe(3);
  });

  it('counts no grant Keycloak refuses before reading its password (a DPoP proof it cannot take)', async () => {
    const user = await createUser(org);
    const key = await dpopKey();
    const grant = async (dpop?: string) => {
      const res = await fetch(
        `${replicas[0]!.url}/auth/realms/${org}/protocol/openid-connect/token`,
        {
          method: 'POST',
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            'x-forwarded-for': '10.9.8.6',
            ...(dpop && { dpop }),
          },
          body: passwordGrantBody(user),
        },
      );
      const body = (await res.json()) as { error?: string; error_description?: string };
      return { status: res.status, error: body.error, description: body.error_description };
    };
    // A job whose proofs name another address (or whose clock is off), past the limit of 3.
    const refused = [];
    for (let i = 0; i < 5; i++) {
      const proof = await dpopProof(key, { method: 'POST', url: 'http://elsewhere.example/token' });
      refused.push(await grant(proof));
    }
    expect(refused).toEqual(
      Array(5).fill({
        status: 400,
        error: 'invalid_request',
        description: 'DPoP HTTP URL mismatch',
      }),
    );
    // Its right password was never checked, so it was never wrong: the mended job logs in.
    expect(await grant()).toMatchObject({ status: 200, error: undefined });
    expect(await wrongPasswordsChecked(user)).toBe(0);
  });

  it('refuses an address past its limit for every account, while other addresses go on', async () => {
    for (let i = 0; i < 6; i++) {
      const stranger = { realm: org, username: uniqueId('nobody-'), password: 'x' };
      expect((await call(replicas[i % 2]!, stranger, '203.0.113.4')).status).toBe(401);
    }
    const user = await createUser(org);
    expect(await call(replicas[0]!, user, '203.0.113.4')).toMatchObject({
      status: 429,
      result: '429-00001',
    });
    expect((await call(replicas[1]!, user, '203.0.113.5')).status).toBe(200);
  });

  it('lets at most the limit per address of a concurrent burst of bad logins reach Keycloak, and answers every one', async () => {
    const user = await createUser(org);
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        call(replicas[i % 2]!, user, `198.51.100.${i % 3}`, `burst-${i}`),
      ),
    );
    expect(answers.every((answer) => answer.status === 401 || answer.status === 429)).toBe(true);
    // Three per address at most (the address limit may refuse some of those first).
    const reachedKeycloak = answers.filter((answer) => answer.status === 401).length;
    expect(reachedKeycloak).toBeGreaterThan(0);
    expect(reachedKeycloak).toBeLessThanOrEqual(9);
    expect(await wrongPasswordsChecked(user)).toBe(reachedKeycloak);
  });

  /** A user with an e-mail, which Keycloak takes as its login name too (loginWithEmailAllowed). */
  async function userWithEmail() {
    const user = await createUser(org);
    const email = `${user.username}@example.com`;
    const admin = await keycloakAdmin();
    await admin.users.update({ realm: org, id: await userIdOf(user) }, { email });
    return { user, email };
  }

  it('counts an account once on Basic whether it is named by its user name or its e-mail, in any case', async () => {
    const { user, email } = await userWithEmail();
    const address = '203.0.113.7';
    expect((await call(replicas[0]!, user, address, 'wrong-a')).status).toBe(401);
    expect(
      (await call(replicas[1]!, { ...user, username: email }, address, 'wrong-b')).status,
    ).toBe(401);
    // Keycloak finds an e-mail in any case (it does not trim a grant's user name).
    const shouted = { ...user, username: email.toUpperCase() };
    expect((await call(replicas[0]!, shouted, address, 'wrong-c')).status).toBe(401);
    // Three failures of the one account from this address: its limit, however it is named.
    for (const username of [user.username, email, email.toUpperCase()]) {
      expect(await call(replicas[1]!, { ...user, username }, address, 'wrong-d')).toMatchObject({
        status: 429,
        result: '429-00001',
      });
    }
    expect(await wrongPasswordsChecked(user)).toBe(3);
    // A wrong password refused for the e-mail is remembered for the user name too: answered
    // from memory, neither checked nor counted again.
    expect((await call(replicas[0]!, user, '203.0.113.8', 'wrong-e')).status).toBe(401);
    expect(
      (await call(replicas[1]!, { ...user, username: email }, '203.0.113.8', 'wrong-e')).status,
    ).toBe(401);
    expect(await wrongPasswordsChecked(user)).toBe(4);
    // An e-mail nobody has is a name as any other: counted as typed.
    const stranger = { realm: org, username: `${uniqueId('nobody-')}@example.com`, password: 'x' };
    expect((await call(replicas[0]!, stranger, '203.0.113.9')).status).toBe(401);
  });

  it('counts an account once on the token endpoint whether it is named by its user name or its e-mail', async () => {
    const { user, email } = await userWithEmail();
    const grant = (username: string, password: string) =>
      fetch(`${replicas[0]!.url}/auth/realms/${org}/protocol/openid-connect/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'x-forwarded-for': '10.9.8.5',
        },
        body: passwordGrantBody({ ...user, username, password }),
      });
    const statuses: number[] = [];
    for (const [i, username] of [user.username, email, user.username].entries()) {
      statuses.push((await grant(username, `wrong-${i}`)).status);
    }
    expect(statuses).toEqual([401, 401, 401]);
    const refused = await grant(email, 'wrong-again');
    expect(refused.status).toBe(429);
    expect(await wrongPasswordsChecked(user)).toBe(3);
  });

  it('a successful login starts the count of its account and address again', async () => {
    const user = await createUser(org);
    expect((await call(replicas[0]!, user, '203.0.113.6', 'wrong-a')).status).toBe(401);
    expect((await call(replicas[0]!, user, '203.0.113.6', 'wrong-b')).status).toBe(401);
    expect((await call(replicas[1]!, user, '203.0.113.6')).status).toBe(200);
    expect((await call(replicas[0]!, user, '203.0.113.6', 'wrong-c')).status).toBe(401);
    expect((await call(replicas[0]!, user, '203.0.113.6', 'wrong-d')).status).toBe(401);
    // A cached login is served whatever the count: it never reaches Keycloak.
    expect((await call(replicas[0]!, user, '203.0.113.6')).status).toBe(200);
  });
});
