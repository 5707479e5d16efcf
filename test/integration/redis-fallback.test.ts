import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';

const REDIS_PORT = 16379;

/** A Redis server of this suite's own, so that stopping it disturbs no other suite. */
async function startRedis(): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(REDIS_PORT), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: 'ignore',
    },
  );
  const probe = new Redis({
    port: REDIS_PORT,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  // Refused connections are expected until the server listens.
  probe.on('error', () => undefined);
  for (let i = 0; i < 50; i++) {
    try {
      await probe.connect();
      await probe.ping();
      probe.disconnect();
      return child;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new Error('redis-server did not start');
}

async function stopRedis(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

/**
 * A second gateway replica (same public address, same Keycloak) whose cache is a Redis that
 * the test stops and restarts.
 */
describe('Redis failure', () => {
  let redis: ChildProcess;
  let replica: Replica;
  let admin: TestUser;
  const prefix = `fallback-${randomBytes(3).toString('hex')}:`;

  beforeAll(async () => {
    redis = await startRedis();
    replica = await startReplica(18200, {
      REDIS_URL: `redis://127.0.0.1:${REDIS_PORT}`,
      REDIS_KEY_PREFIX: prefix,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
    });
    admin = await createUser('master');
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await stopRedis(redis);
  });

  async function organizations(user: TestUser) {
    return (
      await fetch(`${replica.url}/api/platform/organizations`, {
        headers: { authorization: basicAuth(user) },
      })
    ).status;
  }
  async function readyz() {
    const res = await fetch(`${replica.url}/readyz`);
    return { status: res.status, body: (await res.json()) as { data: Record<string, string> } };
  }

  it('keeps serving from the in-process cache, says so in /readyz, and returns to Redis', async () => {
    expect(await organizations(admin)).toBe(200);
    const probe = new Redis({ port: REDIS_PORT });
    expect(await probe.keys(`${prefix}basic:*`)).toHaveLength(1);
    probe.disconnect();
    expect((await readyz()).body.data.cache).toBe('up');

    await stopRedis(redis);
    // A cached login and a new one both work while Redis is down.
    expect(await organizations(admin)).toBe(200);
    const other = await createUser('master');
    expect(await organizations(other)).toBe(200);
    const degraded = await readyz();
    expect(degraded.status).toBe(200);
    expect(degraded.body.data).toMatchObject({ cache: 'degraded', keycloak: 'up', database: 'up' });

    redis = await startRedis();
    let cache = 'degraded';
    for (let i = 0; i < 50 && cache !== 'up'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      cache = (await readyz()).body.data.cache ?? '';
    }
    expect(cache).toBe('up');
    expect(await organizations(admin)).toBe(200);
  });
});
