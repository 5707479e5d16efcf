import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { requestFrom } from '../helpers/from-address.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import {
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { LOCK_TRUSTED_MS } from '../../src/auth/account-locks.ts';
import { testEnv } from '../helpers/test-env.ts';

/** BASIC_CACHE_MAX_SECONDS of these replicas: the clock is moved past it to re-check a login. */
const CACHE_SECONDS = 2;
/** The realm's brute-force failure factor here: a lock at every 3rd failure in a row. */
const FAILURE_FACTOR = 3;

/**
 * Keycloak's temporary lockout refuses the right password as it refuses a wrong one (the same
 * `invalid_grant`, "Invalid user credentials"). The gateway answers as Keycloak does while the
 * lock lasts, but does not remember the right password as a wrong one past it, on any replica
 * or address: a fleet whose stale-password jobs locked the account logs in again once Keycloak
 * lets it.
 */
describe('a Basic login through a Keycloak lockout', () => {
  const clock = aheadClock();
  let replicas: Replica[];
  let org: string;
  let shared: Record<string, string>;

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    // A lock that lasts: the test ends it (`unlock`), not its time.
    const admin = await keycloakAdmin();
    await admin.realms.update(
      { realm: org },
      { failureFactor: FAILURE_FACTOR, waitIncrementSeconds: 600, maxFailureWaitSeconds: 900 },
    );
    shared = {
      BASIC_CACHE_MAX_SECONDS: String(CACHE_SECONDS),
      LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}lockout-${randomBytes(4).toString('hex')}:`,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
    };
    replicas = [
      await startReplica(18240, shared, undefined, clock),
      await startReplica(18242, shared, undefined, clock),
    ];
  });
  afterAll(async () => {
    for (const replica of replicas ?? []) await replica.gateway.close();
    await closeTestDb();
  });

  async function statusOf(replica: Replica, user: TestUser, password = user.password) {
    const res = await fetch(`${replica.url}/api/${org}/platform/workspaces`, {
      headers: { authorization: basicAuth({ ...user, password }) },
    });
    await res.body?.cancel();
    return res.status;
  }

  /** Wrong passwords straight to Keycloak, as stale jobs elsewhere: Keycloak locks the user. */
  async function lock(user: TestUser): Promise<void> {
    for (let failure = 1; failure <= FAILURE_FACTOR; failure++) {
      const body = passwordGrantBody({ ...user, password: `stale-password-${failure}` });
      expect((await postToken(testEnv().keycloakUrl, user.realm, body)).status).toBe(400);
    }
    expect(await lockStateOf(user)).toMatchObject({ disabled: true });
  }

  /**
   * The lock ends, as its time running out would end it: these replicas pull no Keycloak events
   * (replica.ts), so they learn nothing of it.
   */
  async function unlock(user: TestUser): Promise<void> {
    const admin = await keycloakAdmin();
    await admin.attackDetection.del({ realm: user.realm, id: await userIdOf(user) });
    expect(await lockStateOf(user)).toMatchObject({ disabled: false });
  }

  async function lockStateOf(user: TestUser): Promise<Record<string, unknown> | undefined> {
    const admin = await keycloakAdmin();
    return admin.attackDetection.findOne({ realm: user.realm, id: await userIdOf(user) });
  }

  it('refuses the right password while Keycloak locks the user, and lets it in on every replica once the lock ends', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    for (const replica of replicas) expect(await statusOf(replica, user)).toBe(200);
    await lock(user);
    // Past the cache bound, the login is verified afresh: Keycloak refuses it while locked.
    clock.advance(CACHE_SECONDS * 1000 + 300);
    expect(await statusOf(replicas[0]!, user)).toBe(401);
    await unlock(user);
    for (const replica of replicas) expect(await statusOf(replica, user)).toBe(200);
  });

  it("counts guesses refused during the lock they brought about against the address's limit for the account", async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    // The third guess makes Keycloak lock the user; that one and those after it are refused as
    // a lockout, and still guesses of this address: past LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS
    // (5), the gateway refuses them itself.
    const statuses: number[] = [];
    for (let guess = 1; guess <= 7; guess++) {
      statuses.push(await statusOf(replicas[0]!, user, `guess-${guess}`));
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429]);
    expect(await lockStateOf(user)).toMatchObject({ disabled: true });
    await unlock(user);
  });

  it("does not count a kept login's right password refused during the lock against its host", async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    expect(await statusOf(replicas[0]!, user)).toBe(200);
    await lock(user);
    // Past the cache bound: each request of the host's jobs asks Keycloak, which refuses it.
    clock.advance(CACHE_SECONDS * 1000 + 300);
    const statuses: number[] = [];
    for (let request = 1; request <= 7; request++)
      statuses.push(await statusOf(replicas[0]!, user));
    expect(statuses).toEqual([401, 401, 401, 401, 401, 401, 401]);
    await unlock(user);
    expect(await statusOf(replicas[0]!, user)).toBe(200);
  });

  it('lets the right password in on the token endpoint once the lock it was refused during ends', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const viaGateway = `${replicas[0]!.url}/auth`;
    expect((await postToken(viaGateway, org, passwordGrantBody(user))).status).toBe(200);
    await lock(user);
    const refused = await postToken(viaGateway, org, passwordGrantBody(user));
    expect(refused.status).toBe(401);
    expect(refused.json).toMatchObject({ error: 'invalid_grant' });
    await unlock(user);
    expect((await postToken(viaGateway, org, passwordGrantBody(user))).status).toBe(200);
  });

  it('lets a new password set through the gateway in at once there, and on the other replica once the lock is read again', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    await lock(user);
    // Each replica learns the lock on a refusal of Keycloak's.
    expect(await statusOf(replicas[0]!, user, 'guess-1')).toBe(401);
    expect(await statusOf(replicas[1]!, user, 'guess-2')).toBe(401);
    // An administrator lifts the lock early (in Keycloak: no replica sees it) and sets a new
    // password through the first replica's API.
    await unlock(user);
    const renewed = { ...user, password: `${user.password}-new` };
    const asAdmin = basicAuth(await createUser('master'));
    const res = await fetch(
      `${replicas[0]!.url}/api/platform/organizations/${org}/users/${user.username}/password`,
      {
        method: 'PUT',
        headers: { authorization: asAdmin, 'content-type': 'application/json' },
        body: JSON.stringify({ password: renewed.password }),
      },
    );
    await res.body?.cancel();
    expect(res.status).toBe(200);
    expect(await statusOf(replicas[0]!, renewed)).toBe(200);
    // The other replica trusts its note of the lock a short while, then asks Keycloak again.
    clock.advance(LOCK_TRUSTED_MS);
    expect(await statusOf(replicas[1]!, renewed)).toBe(200);
  });

  /**
   * A replica behind a front that sees what reaches Keycloak, in a realm of its own whose lock
   * is short: its end is passed on the replica's clock (the test ends Keycloak's lock itself).
   */
  describe('guesses at a locked user', () => {
    const LOCK_SECONDS = 30;
    const frontClock = aheadClock();
    let front: KeycloakFront;
    let watched: Replica;
    let realm: string;

    beforeAll(async () => {
      realm = await createOrganization(['ws1']);
      const admin = await keycloakAdmin();
      await admin.realms.update(
        { realm },
        {
          failureFactor: FAILURE_FACTOR,
          waitIncrementSeconds: LOCK_SECONDS,
          maxFailureWaitSeconds: 900,
        },
      );
      front = await startKeycloakFront(testEnv().keycloakUrl);
      watched = await startReplica(
        18244,
        { ...shared, KEYCLOAK_URL: front.url },
        undefined,
        frontClock,
      );
    });
    afterAll(async () => {
      await watched?.gateway.close();
      await front?.close();
    });

    async function statusFrom(address: string, user: TestUser, password: string) {
      const url = `${watched.url}/api/${realm}/platform/workspaces`;
      const res = await requestFrom(address, url, {
        headers: { authorization: basicAuth({ ...user, password }) },
      });
      return res.status;
    }

    /** Password grants and admin calls about the realm that reached Keycloak. */
    const keycloakWork = () =>
      front.seen
        .map((request) => request.target)
        .filter((target) => target.includes(`/realms/${realm}/`));

    it('answers a password grant refused during the lock again without Keycloak, uncounted', async () => {
      // Before the test below moves the replica's clock past Keycloak's lock.
      const user = await createUser(realm, { workspaceRoles: ['ws1'] });
      await lock(user);
      const viaGateway = `${watched.url}/auth`;
      const guess = passwordGrantBody({ ...user, password: 'guess-0' });
      const first = await postToken(viaGateway, realm, guess);
      expect(first.status).toBe(401);
      front.seen.length = 0;
      const statuses: number[] = [];
      for (let repeat = 1; repeat <= 6; repeat++) {
        const again = await postToken(viaGateway, realm, guess);
        statuses.push(again.status);
        if (again.status === 401) expect(again.json).toEqual(first.json);
      }
      expect(statuses).toEqual([401, 401, 401, 401, 401, 401]);
      // The lock is read again each time (admin calls), but no grant reaches Keycloak.
      expect(keycloakWork().filter((target) => target.includes('/token'))).toEqual([]);
      await unlock(user);
    });

    it('does not ask about the lock of a typed e-mail whose account the admin API could not tell', async () => {
      const user = await createUser(realm, { workspaceRoles: ['ws1'] });
      const email = `${user.username}@example.test`;
      const admin = await keycloakAdmin();
      await admin.users.update({ realm, id: await userIdOf(user) }, { email, emailVerified: true });
      // The e-mail lookup outlasts the admin API's timeout (KEYCLOAK_TIMEOUT_MS, 5 s): the login
      // is unresolved, its typed name no user name.
      front.hold(/[?&]email=/, 6_000);
      front.seen.length = 0;
      try {
        expect(await statusFrom('127.0.0.20', { ...user, username: email }, 'guess-e')).toBe(401);
      } finally {
        front.hold(/$^/, 0);
      }
      const askedByName = keycloakWork().filter((target) =>
        target.includes(`username=${encodeURIComponent(email)}`),
      );
      expect(askedByName).toEqual([]);
    });

    it('refuses new passwords from any address without asking Keycloak until the lock ends, then lets the right one in', async () => {
      const user = await createUser(realm, { workspaceRoles: ['ws1'] });
      await lock(user);
      // The first refusal is Keycloak's: the replica learns the lock and its end.
      expect(await statusFrom('127.0.0.2', user, 'guess-0')).toBe(401);
      front.seen.length = 0;
      for (let host = 3; host <= 8; host++) {
        expect(await statusFrom(`127.0.0.${host}`, user, `guess-${host}`)).toBe(401);
      }
      expect(keycloakWork()).toEqual([]);
      await unlock(user);
      frontClock.advance(LOCK_SECONDS * 1000 + 1000);
      expect(await statusFrom('127.0.0.9', user, user.password)).toBe(200);
    });
  });
});
