import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.ts';
import { basicAuth } from '../helpers/api.ts';
import { capturingIo, piped } from '../helpers/cli-io.ts';
import { requestFrom, type AddressedResponse } from '../helpers/from-address.ts';
import {
  createUser,
  passwordGrantBody,
  recordFailedLogins,
  uniqueId,
  wrongPasswordsChecked,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * A fleet of automation jobs is not an attacker: many jobs on one host (one source address,
 * 127.0.0.2x here) logging in together, some with a stale password, against the real Keycloak,
 * with the shipped limit per account and address (5) and a per-address limit of 20 (shipped:
 * 100; lower here so spraying is refused within a few requests). Run with two replicas sharing
 * Redis and with one replica without Redis. Keycloak's own count of a user's failed logins
 * (its LOGIN_ERROR events) shows how many wrong passwords reached it. Ports 18530-18551.
 */
const setups = [
  { name: 'two replicas sharing Redis', ports: [18530, 18540], redis: true },
  { name: 'one replica without Redis', ports: [18550], redis: false },
];

describe.each(setups)('login throttle for fleets: $name', ({ ports, redis }) => {
  let replicas: Replica[] = [];
  let org: string;
  let next = 0;
  /** The replicas in turn, as a load balancer would spread the jobs. */
  const replica = () => replicas[next++ % replicas.length]!;

  beforeAll(async () => {
    const shared = {
      ...(redis
        ? {
            REDIS_URL: testEnv().redisUrl,
            REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}fleet-${randomBytes(4).toString('hex')}:`,
          }
        : {}),
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
      LOGIN_MAX_FAILURES_PER_ADDRESS: '20',
    };
    replicas = await Promise.all(ports.map((port) => startReplica(port, shared)));
    org = await createOrganization(['ws1']);
    await recordFailedLogins(org);
  });

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.gateway.close()));
    await closeTestDb();
  });

  function basicFrom(address: string, user: TestUser, password = user.password) {
    return requestFrom(address, `${replica().url}/api/${org}/platform/workspaces`, {
      headers: { authorization: basicAuth({ ...user, password }) },
    });
  }

  function grantFrom(address: string, user: TestUser, password = user.password) {
    return requestFrom(
      address,
      `${replica().url}/auth/realms/${org}/protocol/openid-connect/token`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: passwordGrantBody({ ...user, password }),
      },
    );
  }

  const statusesOf = (answers: AddressedResponse[]) => answers.map((answer) => answer.status);
  const waitOf = (answer: AddressedResponse) => Number(answer.headers['retry-after']);

  it('14 concurrent right password grants of one account from one host all succeed', async () => {
    const job = await createUser(org, { workspaceRoles: ['ws1'] });
    const answers = await Promise.all(
      Array.from({ length: 14 }, () => grantFrom('127.0.0.20', job)),
    );
    expect(statusesOf(answers)).toEqual(answers.map(() => 200));
    expect(await wrongPasswordsChecked(job)).toBe(0);
  });

  it('16 concurrent cold Basic calls of one account from one host all pass', async () => {
    const job = await createUser(org, { workspaceRoles: ['ws1'] });
    const answers = await Promise.all(
      Array.from({ length: 16 }, () => basicFrom('127.0.0.21', job)),
    );
    expect(statusesOf(answers)).toEqual(answers.map(() => 200));
  });

  it('a stale job looping 150 times costs one failure per way of logging in; 9 other accounts on its host then log in over Basic and the password grant', async () => {
    const stale = await createUser(org, { workspaceRoles: ['ws1'] });
    const old = 'the-password-before-rotation';
    const grants: AddressedResponse[] = [];
    const basics: AddressedResponse[] = [];
    for (let i = 0; i < 75; i++) {
      grants.push(await grantFrom('127.0.0.22', stale, old));
      basics.push(await basicFrom('127.0.0.22', stale, old));
    }
    // Every repeat gets the answer the first one got from Keycloak, without asking it again.
    const [firstGrant] = grants;
    expect([400, 401]).toContain(firstGrant!.status);
    expect(firstGrant!.json).toMatchObject({ error: 'invalid_grant' });
    for (const answer of grants) {
      expect({ status: answer.status, json: answer.json }).toEqual({
        status: firstGrant!.status,
        json: firstGrant!.json,
      });
    }
    for (const answer of basics) {
      expect(answer.status).toBe(401);
      expect(answer.json).toMatchObject({ result: '401-00002' });
    }
    expect(await wrongPasswordsChecked(stale)).toBe(2);

    const others = await Promise.all(
      Array.from({ length: 9 }, () => createUser(org, { workspaceRoles: ['ws1'] })),
    );
    const logins = await Promise.all(
      others.flatMap((user) => [basicFrom('127.0.0.22', user), grantFrom('127.0.0.22', user)]),
    );
    expect(statusesOf(logins)).toEqual(logins.map(() => 200));
    // The stale job itself is still answered from memory, and still uncounted.
    expect((await basicFrom('127.0.0.22', stale, old)).status).toBe(401);
    expect(await wrongPasswordsChecked(stale)).toBe(2);
  });

  it('a concurrent burst of distinct wrong passwords: only the limit (5) reach Keycloak, the rest get 429 naming the limit and the wait', async () => {
    const target = await createUser(org, { workspaceRoles: ['ws1'] });
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        i % 2 === 0
          ? grantFrom('127.0.0.23', target, `guess-${i}`)
          : basicFrom('127.0.0.23', target, `guess-${i}`),
      ),
    );
    const refused = answers.filter((answer) => answer.status === 429);
    expect(refused).toHaveLength(25);
    expect(await wrongPasswordsChecked(target)).toBe(5);
    const message =
      /^Too many failed logins of this account from your address; retry in (\d+) s\.$/;
    for (const answer of refused) {
      const wait = waitOf(answer);
      expect(wait).toBeGreaterThan(0);
      expect(wait).toBeLessThanOrEqual(300);
      if ('error' in answer.json) {
        expect(answer.json).toEqual({
          error: 'too_many_attempts',
          error_description: expect.stringMatching(message) as string,
        });
      } else {
        expect(answer.json).toMatchObject({
          data: null,
          result: '429-00001',
          message: expect.stringMatching(message) as string,
        });
      }
      const said = /retry in (\d+) s/.exec(
        String(answer.json.error_description ?? answer.json.message),
      );
      expect(Number(said?.[1])).toBe(wait);
    }
    // The right password from another host is served.
    expect((await grantFrom('127.0.0.24', target)).status).toBe(200);
  });

  it('spraying one password over many accounts is still counted per address: 429 naming the address', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 24; i++) {
      const sprayed = { realm: org, username: uniqueId('sprayed-'), password: 'Winter2026!' };
      statuses.push((await (i % 2 ? basicFrom : grantFrom)('127.0.0.25', sprayed)).status);
    }
    expect(statuses.slice(20).every((status) => status === 429)).toBe(true);
    expect(statuses.slice(0, 20).some((status) => status === 429)).toBe(false);
    const owner = await createUser(org, { workspaceRoles: ['ws1'] });
    const refused = await grantFrom('127.0.0.25', owner);
    expect(refused.status).toBe(429);
    expect(refused.json).toEqual({
      error: 'too_many_attempts',
      error_description: `Too many failed logins from your address; retry in ${waitOf(refused)} s.`,
    });
    const basicRefused = await basicFrom('127.0.0.25', owner);
    expect(basicRefused.json).toMatchObject({
      result: '429-00001',
      message: `Too many failed logins from your address; retry in ${waitOf(basicRefused)} s.`,
    });
    expect((await basicFrom('127.0.0.26', owner)).status).toBe(200);
    expect((await grantFrom('127.0.0.26', owner)).status).toBe(200);
  });

  it('a password remembered as wrong, then set through the API, logs in at once over Basic and the grant', async () => {
    const job = await createUser(org, { workspaceRoles: ['ws1'] });
    const next = `Next-${randomBytes(6).toString('hex')}`;
    // A job tried the next password before it was set: remembered as wrong on both ways.
    expect((await basicFrom('127.0.0.27', job, next)).status).toBe(401);
    expect([400, 401]).toContain((await grantFrom('127.0.0.27', job, next)).status);
    const admin = await createUser('master');
    const set = await fetch(
      `${replica().url}/api/platform/organizations/${org}/users/${job.username}/password`,
      {
        method: 'PUT',
        headers: { authorization: basicAuth(admin), 'content-type': 'application/json' },
        body: JSON.stringify({ password: next }),
      },
    );
    expect(set.status).toBe(200);
    expect((await basicFrom('127.0.0.27', job, next)).status).toBe(200);
    expect((await grantFrom('127.0.0.27', job, next)).status).toBe(200);
  });

  it('the CLI says a throttled login in words, with the limit and the wait', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    // The CLI connects from 127.0.0.1; five failures of this account from there first.
    for (let i = 0; i < 5; i++) {
      expect((await grantFrom('127.0.0.1', user, `guess-${i}`)).status).not.toBe(429);
    }
    const configDir = await mkdtemp(join(tmpdir(), 'realmgate-fleet-cli-'));
    try {
      const { io, output } = capturingIo(piped(user.password));
      const code = await runCli(
        ['login', org, user.username, '--password-stdin'],
        { REALMGATE_URL: replicas[0]!.url, REALMGATE_CONFIG_DIR: configDir },
        io,
      );
      expect(code).toBe(1);
      expect(output.stderr).toMatch(
        /error 429: login refused for now\. Too many failed logins of this account from your address; retry in \d+ s\./,
      );
      expect(output.stderr).not.toContain('unexpected answer');
      expect(output.stderr).not.toContain(user.password);
    } finally {
      await rm(configDir, { recursive: true, force: true });
    }
  });
});
