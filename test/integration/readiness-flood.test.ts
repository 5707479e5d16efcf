import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Knex } from 'knex';
import { basicAuth } from '../helpers/api.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/** Each database readiness check this process makes: how many began, how many at once at most. */
const checks = vi.hoisted(() => ({ started: 0, running: 0, most: 0 }));

vi.mock('../../src/db/database.ts', async (importOriginal) => {
  const original = await importOriginal<typeof import('../../src/db/database.ts')>();
  return {
    ...original,
    checkDatabase: async (db: Knex) => {
      checks.started += 1;
      checks.running += 1;
      checks.most = Math.max(checks.most, checks.running);
      try {
        await original.checkDatabase(db);
      } finally {
        checks.running -= 1;
      }
    },
  };
});

/**
 * The public `/readyz` is unauthenticated: a flood of it must not become a flood of database
 * queries (and Redis pings) that fills the pool the API needs. Ports 21130/21131.
 */
describe('/readyz under a flood', () => {
  let replica: Replica;
  let admin: TestUser;

  beforeAll(async () => {
    replica = await startReplica(21130, { REDIS_URL: testEnv().redisUrl });
    admin = await createUser('master');
  });

  afterAll(async () => {
    await replica?.gateway.close();
  });

  it('shares one database check among concurrent requests, and the API keeps answering', async () => {
    const organizations = () =>
      fetch(`${replica.url}/api/platform/organizations`, {
        headers: { authorization: basicAuth(admin) },
      });
    expect((await organizations()).status).toBe(200);
    checks.started = 0;
    checks.most = 0;
    const began = performance.now();
    const flood = Array.from({ length: 300 }, async () => {
      const res = await fetch(`${replica.url}/readyz`);
      return { status: res.status, body: (await res.json()) as { data: Record<string, unknown> } };
    });
    const api = organizations();
    const answers = await Promise.all(flood);
    const seconds = (performance.now() - began) / 1000;
    expect((await api).status).toBe(200);
    for (const answer of answers) {
      expect(answer).toMatchObject({
        status: 200,
        body: { data: { database: 'up', cache: 'up' } },
      });
    }
    // One check at a time, its result reused for about a second.
    expect(checks.most).toBe(1);
    expect(checks.started).toBeLessThanOrEqual(Math.ceil(seconds) + 1);
  });
});
