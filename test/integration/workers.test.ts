import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import {
  fromEveryWorker,
  startClusteredGateway,
  startTwoWorkers,
  type Answer,
  type ClusteredGateway,
} from '../helpers/clustered-gateway.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.ts';
import type { KeycloakRelay } from '../helpers/tcp-front.ts';
import { testEnv } from '../helpers/test-env.ts';

/** An access token of an offline session: what DELETE .../refresh_tokens revokes. */
async function offlineAccessTokenOf(user: TestUser): Promise<string> {
  const res = await fetch(
    `${testEnv().publicUrl}/auth/realms/${user.realm}/protocol/openid-connect/token`,
    {
      method: 'POST',
      body: new URLSearchParams({
        client_id: `_${user.realm}-api`,
        grant_type: 'password',
        scope: 'openid offline_access',
        username: user.username,
        password: user.password,
      }),
    },
  );
  const { access_token } = (await res.json()) as { access_token?: string };
  if (!access_token) throw new Error(`no access token for ${user.username}`);
  return access_token;
}

/** Password grants the gateway made, every worker's, from one scrape. */
async function grantsOf(gateway: ClusteredGateway): Promise<number> {
  let grants = 0;
  for (const match of (await gateway.metrics()).matchAll(
    /^realmgate_keycloak_requests_total\{kind="grant",[^}]*\} (\d+)/gm,
  )) {
    grants += Number(match[1]);
  }
  return grants;
}

/**
 * Three wrong passwords of one user spread over both workers, against a limit of 3: one
 * throttle, so every worker then refuses with 429.
 */
async function expectOneThrottleAcrossWorkers(gateway: ClusteredGateway, org: string) {
  const path = `/api/${org}/platform/workspaces`;
  const user = await createUser(org, { workspaceRoles: ['ws1'] });
  const wrong = (i: number) => ({ authorization: basicAuth({ ...user, password: `wrong-${i}` }) });
  const failures: Answer[] = [];
  for (let i = 0; i < 3; i++) failures.push(await gateway.send(path, wrong(i)));
  expect(failures.map((a) => a.status)).toEqual([401, 401, 401]);
  expect(new Set(failures.map((a) => a.worker)).size).toBe(2);
  let i = 3;
  const refused = await fromEveryWorker(() => gateway.send(path, wrong(i++)));
  expect(refused.map((a) => a.status)).toEqual(refused.map(() => 429));
}

/** 30 identical cold Basic requests over both workers: all 200, one password grant. */
async function expectOneGrantForColdBurst(gateway: ClusteredGateway, org: string) {
  const path = `/api/${org}/platform/workspaces`;
  const user: TestUser = await createUser(org, { workspaceRoles: ['ws1'] });
  const before = await grantsOf(gateway);
  const answers = await Promise.all(
    Array.from({ length: 30 }, () => gateway.send(path, { authorization: basicAuth(user) })),
  );
  expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
  expect(new Set(answers.map((a) => a.worker)).size).toBe(2);
  expect((await grantsOf(gateway)) - before).toBe(1);
}

/**
 * `node src/main.ts` with WORKERS=2: one gateway whose two worker processes share the listeners
 * and its state, through the supervising process without Redis and through Redis with it.
 */
describe.each([
  { name: 'without Redis (through the supervising process)', port: 18640, redis: false },
  { name: 'with Redis', port: 18650, redis: true },
])('two workers, $name', ({ port, redis }) => {
  let gateway: ClusteredGateway;
  let keycloak: KeycloakRelay;
  let org: string;
  const path = () => `/api/${org}/platform/workspaces`;

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    ({ gateway, keycloak } = await startTwoWorkers(port, {
      LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS: '3',
      ...(redis
        ? {
            REDIS_URL: testEnv().redisUrl,
            REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}workers-${randomBytes(4).toString('hex')}:`,
          }
        : {}),
    }));
  });

  afterAll(async () => {
    await gateway?.stop();
    await keycloak?.cut();
    await closeTestDb();
  });

  it('serves from every worker; /readyz names the worker; one scrape shows both', async () => {
    const answers = await fromEveryWorker(() => gateway.send('/healthz'));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const ready = await fetch(`${gateway.adminUrl}/readyz`);
    expect(ready.status).toBe(200);
    expect(['1', '2']).toContain(ready.headers.get('x-realmgate-worker'));
    const text = await gateway.metrics();
    for (const worker of ['1', '2']) {
      const count = new RegExp(
        `^realmgate_worker_requests_total\\{worker="${worker}"\\} (\\d+)`,
        'm',
      );
      expect(Number(count.exec(text)?.[1])).toBeGreaterThan(0);
    }
    // Requests summed over both workers, not one worker's.
    const served = [...text.matchAll(/^realmgate_http_requests_total\{[^}]*\} (\d+)/gm)];
    expect(served.reduce((sum, m) => sum + Number(m[1]), 0)).toBeGreaterThanOrEqual(answers.length);
  });

  it('a revocation made through one worker is refused by every worker at once', async () => {
    const member = await createUser(org, { workspaceRoles: ['ws1'] });
    const bearer = { authorization: `Bearer ${await offlineAccessTokenOf(member)}` };
    const before = await fromEveryWorker(() => gateway.send(path(), bearer));
    expect(before.map((a) => a.status)).toEqual(before.map(() => 200));

    const revoked = await gateway.send(
      `/api/${org}/platform/users/_current/refresh_tokens`,
      bearer,
      'DELETE',
    );
    expect(revoked.status).toBe(200);
    const after = await fromEveryWorker(() => gateway.send(path(), bearer));
    expect(after.map((a) => a.status)).toEqual(after.map(() => 401));
  });

  it('verifies tokens on every worker through a Keycloak outage, with the key set one worker fetched', async () => {
    // A realm no worker has seen: one request makes one worker fetch its key set.
    const fresh = await createOrganization(['ws1']);
    const member = await createUser(fresh, { workspaceRoles: ['ws1'] });
    const bearer = { authorization: `Bearer ${await offlineAccessTokenOf(member)}` };
    const listing = `/api/${fresh}/platform/workspaces`;
    const first = await gateway.send(listing, bearer);
    expect(first.status).toBe(200);

    await keycloak.cut();
    try {
      const during = await fromEveryWorker(() => gateway.send(listing, bearer));
      expect(during.map((a) => a.status)).toEqual(during.map(() => 200));
    } finally {
      await keycloak.restore();
    }
  });

  it('counts failed logins across workers: the throttle refuses on every worker', () =>
    expectOneThrottleAcrossWorkers(gateway, org));

  it('a cold burst of identical Basic requests over both workers makes exactly one grant', () =>
    expectOneGrantForColdBurst(gateway, org));

  it('starts a worker that dies again, and counts it', async () => {
    const ready = await gateway.logLine((l) => l.msg === 'worker ready' && l.worker === 1);
    process.kill(ready.pid as number, 'SIGKILL');
    await gateway.logLine((l) => l.msg === 'worker died: starting it again' && l.worker === 1);
    await gateway.logLine((l) => l.msg === 'worker ready' && l.worker === 1 && l.pid !== ready.pid);
    expect(await gateway.metrics()).toMatch(/^realmgate_worker_restarts_total 1$/m);
    const answers = await fromEveryWorker(() => gateway.send('/healthz'));
    expect(answers.every((a) => a.status === 200)).toBe(true);
  });
});

/**
 * While Redis is down, the workers of one gateway fall back to the supervising process's cache,
 * not each to its own: still one gateway (one grant for a cold burst, one throttle).
 */
describe('two workers while their Redis is down', () => {
  const port = 18660;
  let redis: RedisServer;
  let gateway: ClusteredGateway;
  let org: string;

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    redis = await startRedisServer(port + 7);
    gateway = await startClusteredGateway(port, {
      WORKERS: '2',
      // Access-log lines of answered requests (debug) name the worker.
      LOG_LEVEL: 'debug',
      REDIS_URL: redis.url,
      LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS: '3',
    });
    await redis.stop();
  });

  afterAll(async () => {
    await gateway?.stop();
    await redis?.stop();
    await closeTestDb();
  });

  it('a cold burst of identical Basic requests over both workers makes exactly one grant', () =>
    expectOneGrantForColdBurst(gateway, org));

  it('counts failed logins across workers: the throttle refuses on every worker', () =>
    expectOneThrottleAcrossWorkers(gateway, org));
});
