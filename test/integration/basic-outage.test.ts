import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { createUser, keycloakAdmin, userIdOf, type TestUser } from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/** BASIC_CACHE_MAX_SECONDS of these replicas: each outage below outlasts it. */
const CACHE_SECONDS = 2;

/**
 * A long Keycloak outage is not a Basic outage: a Basic login verified before Keycloak became
 * unreachable is served past BASIC_CACHE_MAX_SECONDS while it stays so (the same user name and
 * password only), by every replica sharing Redis; anything else answers 503 as before; a
 * revocation ends it; once Keycloak answers again, the next use is verified afresh. Keycloak is
 * cut off behind a front (connections refused, or never answered); with Redis, a third replica
 * reaches Keycloak directly, as one that still can during a partial outage.
 */
describe.each([
  { name: 'with Redis', redis: true, port: 18880 },
  { name: 'without Redis', redis: false, port: 18900 },
])('a Basic login through a Keycloak outage ($name)', ({ redis, port }) => {
  // The replicas' one time (cached logins carry deadlines another replica reads).
  const clock = aheadClock();
  let front: KeycloakFront;
  /** Cut off from Keycloak with the front; `second` shares `first`'s Redis (with Redis only). */
  let first: Replica;
  let second: Replica | undefined;
  /** Reaches Keycloak directly, same Redis (with Redis only). */
  let direct: Replica | undefined;
  let org: string;

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    front = await startKeycloakFront(testEnv().keycloakUrl);
    const shared = {
      BASIC_CACHE_MAX_SECONDS: String(CACHE_SECONDS),
      BASIC_OUTAGE_MAX_SECONDS: '600',
      // Long enough for a grant through the front on a loaded machine; the `hang` case waits it.
      KEYCLOAK_TIMEOUT_MS: '3000',
      LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
      ...(redis && {
        REDIS_URL: testEnv().redisUrl,
        REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}outage-${randomBytes(4).toString('hex')}:`,
        REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
      }),
    };
    first = await startReplica(port, { ...shared, KEYCLOAK_URL: front.url }, undefined, clock);
    if (redis) {
      second = await startReplica(
        port + 2,
        { ...shared, KEYCLOAK_URL: front.url },
        undefined,
        clock,
      );
      direct = await startReplica(port + 4, shared, undefined, clock);
    }
  });
  afterAll(async () => {
    await front?.set('forward');
    for (const replica of [first, second, direct]) await replica?.gateway.close();
    await front?.close();
    await closeTestDb();
  });

  const path = () => `/api/${org}/platform/workspaces`;
  const cutOff = () => [first, second].filter((replica) => replica !== undefined);

  async function get(replica: Replica, user: TestUser, password = user.password) {
    const res = await fetch(`${replica.url}${path()}`, {
      headers: { authorization: basicAuth({ ...user, password }) },
    });
    await res.body?.cancel();
    return { status: res.status, retryAfter: res.headers.get('retry-after') };
  }

  /** The status `user`'s Basic call gets from each replica cut off from Keycloak. */
  async function statusesOf(user: TestUser, password = user.password): Promise<number[]> {
    const statuses: number[] = [];
    for (const replica of cutOff()) statuses.push((await get(replica, user, password)).status);
    return statuses;
  }

  /** A member whose Basic login `first` has verified and cached. */
  async function cachedMember(): Promise<TestUser> {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    expect((await get(first, user)).status).toBe(200);
    return user;
  }

  /** Moves the replicas' clock past BASIC_CACHE_MAX_SECONDS. */
  const pastTheCacheBound = () => clock.advance(CACHE_SECONDS * 1000 + 300);

  /** Keycloak is back: the replicas learn it from their readiness probe, as a balancer's. */
  async function restore(): Promise<void> {
    await front.set('forward');
    for (const replica of cutOff()) {
      const ready = await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/readyz`);
      await ready.body?.cancel();
      expect(ready.status).toBe(200);
    }
  }

  it('serves a login cached before the cut past the cache bound; another password, a new login: 503', async () => {
    const user = await cachedMember();
    const other = await createUser(org, { workspaceRoles: ['ws1'] });
    await front.set('closed');
    try {
      pastTheCacheBound();
      // Twice: the first call finds Keycloak unreachable, the next knows it is.
      expect(await statusesOf(user)).toEqual(cutOff().map(() => 200));
      expect(await statusesOf(user)).toEqual(cutOff().map(() => 200));
      for (const [who, password] of [
        [user, 'another-password'],
        [other, other.password],
      ] as const) {
        for (const replica of cutOff()) {
          expect(await get(replica, who, password)).toEqual({ status: 503, retryAfter: '5' });
        }
      }
    } finally {
      await restore();
    }
  });

  it('a Keycloak that never answers (timeout) is unreachable too', async () => {
    const user = await cachedMember();
    await front.set('hang');
    try {
      pastTheCacheBound();
      expect(await statusesOf(user)).toEqual(cutOff().map(() => 200));
    } finally {
      await restore();
    }
  });

  it('once Keycloak answers again, the next use is verified afresh: a password changed meanwhile is refused', async () => {
    const user = await cachedMember();
    await front.set('closed');
    try {
      pastTheCacheBound();
      expect(await statusesOf(user)).toEqual(cutOff().map(() => 200));
      const admin = await keycloakAdmin();
      await admin.users.resetPassword({
        realm: org,
        id: await userIdOf(user),
        credential: { type: 'password', value: 'changed-in-the-outage', temporary: false },
      });
      expect(await statusesOf(user)).toEqual(cutOff().map(() => 200));
    } finally {
      await restore();
    }
    expect(await statusesOf(user)).toEqual(cutOff().map(() => 401));
    expect(await statusesOf(user, 'changed-in-the-outage')).toEqual(cutOff().map(() => 200));
    // The refusal ended the kept login, on every replica: in the next outage the old password
    // is never served. It is a login Keycloak must check (503): the new password's success
    // dropped the account's remembered failures (one of them could have been the new password).
    await front.set('closed');
    try {
      pastTheCacheBound();
      expect(await statusesOf(user)).toEqual(cutOff().map(() => 503));
      expect(await statusesOf(user, 'changed-in-the-outage')).toEqual(cutOff().map(() => 200));
    } finally {
      await restore();
    }
  });

  it('a revocation made before the outage ends the login', async () => {
    const user = await cachedMember();
    const revoked = await fetch(`${first.url}/api/${org}/platform/users/_current/refresh_tokens`, {
      method: 'DELETE',
      headers: { authorization: basicAuth(user) },
    });
    expect(revoked.status).toBe(200);
    await front.set('closed');
    try {
      pastTheCacheBound();
      expect(await statusesOf(user)).toEqual(cutOff().map(() => 503));
    } finally {
      await restore();
    }
  });

  // Only a replica that reaches Keycloak can revoke (the admin API); without Redis, none shares.
  if (redis) {
    it('a revocation made during the outage, on a replica that reaches Keycloak, ends the login', async () => {
      const user = await cachedMember();
      await front.set('closed');
      try {
        pastTheCacheBound();
        expect(await statusesOf(user)).toEqual(cutOff().map(() => 200));
        const revoked = await fetch(
          `${direct!.url}/api/${org}/platform/users/_current/refresh_tokens`,
          { method: 'DELETE', headers: { authorization: basicAuth(user) } },
        );
        expect(revoked.status).toBe(200);
        // The replicas learn it from Redis within milliseconds: wait for that event.
        await expect
          .poll(() => statusesOf(user), { timeout: 30_000, interval: 50 })
          .toEqual(cutOff().map(() => 503));
      } finally {
        await restore();
      }
    });
  }
});
