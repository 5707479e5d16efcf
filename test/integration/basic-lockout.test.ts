import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
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

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    // A lock that lasts: the test ends it (`unlock`), not its time.
    const admin = await keycloakAdmin();
    await admin.realms.update(
      { realm: org },
      { failureFactor: FAILURE_FACTOR, waitIncrementSeconds: 600, maxFailureWaitSeconds: 900 },
    );
    const shared = {
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
});
