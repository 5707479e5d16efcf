import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fromEveryWorker,
  startClusteredGateway,
  type ClusteredGateway,
} from '../helpers/clustered-gateway.ts';
import { dpopKey, dpopProof, type DpopKey } from '../helpers/dpop.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, passwordGrantBody, postToken } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { startTcpFront, type TcpFront } from '../helpers/tcp-front.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * A DPoP proof's one-time use through a Redis outage, against the real Keycloak and Redis (cut
 * off behind a relay): the in-process record serves while Redis fails, and a proof it took
 * stays used once Redis answers again. Ports 19560-19561 (the replica), 19563 (the relay).
 */
describe('DPoP replays through a Redis outage', () => {
  const { publicUrl } = testEnv();
  let front: TcpFront;
  let replica: Replica;
  let org: string;
  let key: DpopKey;
  let access: string;
  const path = () => `/api/${org}/platform/workspaces`;

  beforeAll(async () => {
    const redis = new URL(testEnv().redisUrl);
    front = await startTcpFront(19563, { host: redis.hostname, port: Number(redis.port || 6379) });
    redis.host = `127.0.0.1:${front.port}`;
    replica = await startReplica(19560, {
      REDIS_URL: redis.href,
      REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}dpop-outage-${randomBytes(4).toString('hex')}:`,
    });
    org = await createOrganization(['ws1']);
    const member = await createUser(org, { workspaceRoles: ['ws1'] });
    key = await dpopKey();
    const tokenUrl = `${publicUrl}/auth/realms/${org}/protocol/openid-connect/token`;
    const grant = await postToken(`${replica.url}/auth`, org, passwordGrantBody(member), {
      dpop: await dpopProof(key, { method: 'POST', url: tokenUrl }),
    });
    expect(grant.status).toBe(200);
    access = String(grant.json.access_token);
  });

  afterAll(async () => {
    await front?.restore().catch(() => undefined);
    await replica?.gateway.close();
    await front?.cut();
    await closeTestDb();
  });

  async function call(proof: string) {
    const res = await fetch(`${replica.url}${path()}`, {
      headers: { authorization: `DPoP ${access}`, dpop: proof },
    });
    const body = (await res.json()) as { message: string };
    return { status: res.status, message: body.message };
  }

  const freshProof = () =>
    dpopProof(key, { method: 'GET', url: `${publicUrl}${path()}`, accessToken: access });

  /** What the replica's readiness says of its cache: `up` (Redis) or `degraded`. */
  async function cacheState(): Promise<unknown> {
    const res = await fetch(`http://127.0.0.1:19561/readyz`);
    return ((await res.json()) as { data: { cache?: unknown } }).data.cache;
  }

  it('a proof taken while Redis failed is still refused once Redis is back', async () => {
    // Known before the cut: the organization and the token.
    expect((await call(await freshProof())).status).toBe(200);
    await front.cut();
    const proof = await freshProof();
    expect(await call(proof)).toMatchObject({ status: 200 });
    await expect.poll(cacheState, EVENTUALLY).toBe('degraded');
    expect(await call(proof)).toEqual({ status: 401, message: 'This DPoP proof was used before.' });

    await front.restore();
    await expect.poll(cacheState, EVENTUALLY).toBe('up');
    // Redis never saw it: the replica's own record of the outage still counts.
    expect(await call(proof)).toEqual({ status: 401, message: 'This DPoP proof was used before.' });
    // And a new proof is recorded in Redis again, once.
    const after = await freshProof();
    expect((await call(after)).status).toBe(200);
    expect((await call(after)).status).toBe(401);
  });
});

/**
 * The same with the workers of one gateway: while Redis fails they share the supervising
 * process's record, so a proof one worker took meanwhile is refused by every worker once Redis
 * is back, a worker that made no Redis call of its own during the outage included. Ports
 * 19570-19571 (the gateway), 19577 (its Redis).
 */
describe('DPoP replays through a Redis outage, two workers', () => {
  const port = 19570;
  const { publicUrl } = testEnv();
  let redis: RedisServer;
  let gateway: ClusteredGateway;
  let org: string;
  let key: DpopKey;
  let access: string;
  const path = () => `/api/${org}/platform/workspaces`;

  beforeAll(async () => {
    redis = await startRedisServer(port + 7);
    gateway = await startClusteredGateway(port, {
      WORKERS: '2',
      // Access-log lines of answered requests (debug) name the worker.
      LOG_LEVEL: 'debug',
      REDIS_URL: redis.url,
    });
    org = await createOrganization(['ws1']);
    const member = await createUser(org, { workspaceRoles: ['ws1'] });
    key = await dpopKey();
    const tokenUrl = `${publicUrl}/auth/realms/${org}/protocol/openid-connect/token`;
    const grant = await postToken(`${publicUrl}/auth`, org, passwordGrantBody(member), {
      dpop: await dpopProof(key, { method: 'POST', url: tokenUrl }),
    });
    expect(grant.status).toBe(200);
    access = String(grant.json.access_token);
  });

  afterAll(async () => {
    await gateway?.stop();
    await redis?.stop();
    await closeTestDb();
  });

  /** What each worker's readiness says of its cache, until both have said it. */
  async function cacheStates(): Promise<unknown[]> {
    const answers = await fromEveryWorker(() => gateway.send('/readyz'));
    const byWorker = new Map(
      answers.map((a) => [
        a.worker,
        (JSON.parse(a.body) as { data: { cache?: unknown } }).data.cache,
      ]),
    );
    return [...byWorker.values()];
  }

  it('a proof one worker took while Redis failed is refused by every worker once Redis is back', async () => {
    // No DPoP request reaches the gateway before the outage: the worker that takes the proof
    // is the only one that ever claimed one.
    await redis.stop();
    const proof = await dpopProof(key, {
      method: 'GET',
      url: `${publicUrl}${path()}`,
      accessToken: access,
    });
    const taken = await gateway.send(path(), { authorization: `DPoP ${access}`, dpop: proof });
    expect(taken.status).toBe(200);

    await redis.start();
    // Every worker has its Redis connection back (its readiness pinged Redis and was answered).
    await expect.poll(cacheStates, { timeout: 30_000, interval: 250 }).toEqual(['up', 'up']);
    const replays = await fromEveryWorker(() =>
      gateway.send(path(), { authorization: `DPoP ${access}`, dpop: proof }),
    );
    expect(replays.map((a) => [a.worker, a.status])).toEqual(replays.map((a) => [a.worker, 401]));
  });
});
