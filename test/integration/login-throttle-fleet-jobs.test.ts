import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { requestFrom, type AddressedResponse } from '../helpers/from-address.ts';
import {
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  recordFailedLogins,
  userIdOf,
  wrongPasswordsChecked,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * Fleets of automation jobs with the shipped limits (5 failures per account and address, 100
 * per address) and Keycloak's shipped brute-force detection (a lock at 30 failures): many jobs
 * on one host start together, over Basic on /api and the password grant on /auth, some with a
 * stale password. Right logins are never refused, a stale job costs only its own attempts, and
 * it never brings Keycloak to lock the account for the others. Cold logins: every job's first.
 * Port 18562/18563; hosts 127.0.0.40-90.
 */
/** Users made at once (see `newUsers`). */
const USERS_AT_ONCE = 5;

describe('fleets of jobs on one host, with the shipped limits', () => {
  let replica: Replica;
  let org: string;

  beforeAll(async () => {
    replica = await startReplica(18562, {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}fleet-jobs-${randomBytes(4).toString('hex')}:`,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
    });
    org = await createOrganization(['ws1']);
    await recordFailedLogins(org);
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  function basicFrom(address: string, user: TestUser, password = user.password) {
    return requestFrom(address, `${replica.url}/api/${org}/platform/workspaces`, {
      headers: { authorization: basicAuth({ ...user, password }) },
    });
  }

  function grantFrom(address: string, user: TestUser, password = user.password) {
    return requestFrom(address, `${replica.url}/auth/realms/${org}/protocol/openid-connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: passwordGrantBody({ ...user, password }),
    });
  }

  /** A job's login both ways at once: Basic on the API, and a token. */
  const bothWays = (address: string, user: TestUser, password = user.password) => [
    basicFrom(address, user, password),
    grantFrom(address, user, password),
  ];

  const statusesOf = (answers: AddressedResponse[]) => answers.map((answer) => answer.status);
  const allServed = (answers: AddressedResponse[]) => answers.map(() => 200);

  /** Whether Keycloak's brute-force detection locks the user now. */
  async function lockedInKeycloak(user: TestUser): Promise<boolean> {
    const admin = await keycloakAdmin();
    const state = await admin.attackDetection.findOne({ realm: org, id: await userIdOf(user) });
    return state?.disabled === true;
  }

  /**
   * `count` new users of the workspace, made a few at a time: each is an administrator's login
   * and a password set, two password hashes in Keycloak, and 50 at once outlasted the admin
   * call's timeout on a loaded 2-core machine (the test failed making its users, before any job
   * logged in). The jobs still start together.
   */
  async function newUsers(count: number): Promise<TestUser[]> {
    const users: TestUser[] = [];
    while (users.length < count) {
      const batch = Math.min(USERS_AT_ONCE, count - users.length);
      users.push(
        ...(await Promise.all(
          Array.from({ length: batch }, () => createUser(org, { workspaceRoles: ['ws1'] })),
        )),
      );
    }
    return users;
  }

  it('50 jobs of 50 accounts starting together on one host: every Basic call and grant is served', async () => {
    const jobs = await newUsers(50);
    const answers = await Promise.all(jobs.flatMap((job) => bothWays('127.0.0.40', job)));
    expect(statusesOf(answers)).toEqual(allServed(answers));
  });

  it('50 jobs of one account starting together on one host: every Basic call and grant is served', async () => {
    const [job] = await newUsers(1);
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => bothWays('127.0.0.41', job!)).flat(),
    );
    expect(statusesOf(answers)).toEqual(allServed(answers));
    expect(await wrongPasswordsChecked(job!)).toBe(0);
  });

  it('a job looping on a stale password beside right jobs of its account and others on its host: the right ones are all served, the stale one stops reaching Keycloak', async () => {
    const [account, ...others] = await newUsers(5);
    const stale = 'the-password-before-rotation';
    const staleAnswers: AddressedResponse[] = [];
    const rightAnswers: AddressedResponse[] = [];
    const staleJob = async () => {
      for (let i = 0; i < 20; i++)
        staleAnswers.push(...(await Promise.all(bothWays('127.0.0.42', account!, stale))));
    };
    const rightJob = async (user: TestUser) => {
      for (let i = 0; i < 5; i++)
        rightAnswers.push(...(await Promise.all(bothWays('127.0.0.42', user))));
    };
    await Promise.all([
      staleJob(),
      rightJob(account!),
      rightJob(account!),
      ...others.map(rightJob),
    ]);
    expect(statusesOf(rightAnswers)).toEqual(allServed(rightAnswers));
    expect(statusesOf(staleAnswers)).toEqual(staleAnswers.map(() => 401));
    for (let i = 0; i < 5; i++) await Promise.all(bothWays('127.0.0.42', account!, stale));
    // 25 attempts each way: Keycloak checked the stale password once, once more after the
    // account's first success (which may have been a new password), and once more if a right
    // job's success came after the stale job's last attempt; every other one was answered from
    // memory. Keycloak stores a failure's event as it answers, not before: waited for.
    await expect.poll(() => wrongPasswordsChecked(account!), EVENTUALLY).toBeGreaterThan(0);
    expect(await wrongPasswordsChecked(account!)).toBeLessThanOrEqual(6);
    expect(await lockedInKeycloak(account!)).toBe(false);
  });

  it('40 jobs with one stale password starting together on one host cost one failure each way: Keycloak does not lock their account for its right jobs', async () => {
    const [account, ...others] = await newUsers(6);
    const stale = 'the-password-before-rotation';
    const [staleAnswers, othersAnswers] = await Promise.all([
      Promise.all(Array.from({ length: 40 }, () => bothWays('127.0.0.43', account!, stale)).flat()),
      Promise.all(others.flatMap((user) => bothWays('127.0.0.43', user))),
    ]);
    expect(statusesOf(staleAnswers)).toEqual(staleAnswers.map(() => 401));
    expect(statusesOf(othersAnswers)).toEqual(allServed(othersAnswers));
    // A repeated wrong password is one failure, however many jobs send it at once.
    await expect.poll(() => wrongPasswordsChecked(account!), EVENTUALLY).toBe(2);
    expect(await lockedInKeycloak(account!)).toBe(false);
    // The account's right jobs, on this host and another one.
    const right = await Promise.all([
      ...bothWays('127.0.0.43', account!),
      ...bothWays('127.0.0.44', account!),
    ]);
    expect(statusesOf(right)).toEqual(allServed(right));
  });

  it('the same stale password from 40 hosts at once costs one failure each way: Keycloak does not lock the account for its right jobs', async () => {
    const [account, ...others] = await newUsers(6);
    const stale = 'the-password-before-rotation';
    const hosts = Array.from({ length: 40 }, (_, i) => `127.0.0.${50 + i}`);
    const [staleAnswers, othersAnswers] = await Promise.all([
      Promise.all(hosts.flatMap((host) => bothWays(host, account!, stale))),
      Promise.all(others.flatMap((user, i) => bothWays(hosts[i]!, user))),
    ]);
    expect(statusesOf(staleAnswers)).toEqual(staleAnswers.map(() => 401));
    expect(statusesOf(othersAnswers)).toEqual(allServed(othersAnswers));
    await expect.poll(() => wrongPasswordsChecked(account!), EVENTUALLY).toBe(2);
    expect(await lockedInKeycloak(account!)).toBe(false);
    const right = await Promise.all([
      ...bothWays(hosts[0]!, account!),
      ...bothWays('127.0.0.90', account!),
    ]);
    expect(statusesOf(right)).toEqual(allServed(right));
  });
});
