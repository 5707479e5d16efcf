import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { startDatabaseRelay, type DatabaseRelay } from '../helpers/tcp-front.ts';

/**
 * A replica whose platform database sits behind a relay the test cuts: calls that need the
 * database answer 503 `503-00003` with Retry-After, in the envelope, and work again once the
 * database is back. Ports 18860/18861 (replica), 18862 (relay).
 */
describe('platform database failure', () => {
  let front: DatabaseRelay;
  let replica: Replica;
  let admin: TestUser;

  beforeAll(async () => {
    front = await startDatabaseRelay(18862);
    replica = await startReplica(18860, { DATABASE_URL: front.databaseUrl });
    admin = await createUser('master');
  });

  afterAll(async () => {
    await front?.restore().catch(() => undefined);
    await replica?.gateway.close();
    await front?.cut();
  });

  async function listOrganizations() {
    const res = await fetch(`${replica.url}/api/platform/organizations`, {
      headers: { authorization: basicAuth(admin) },
    });
    return {
      status: res.status,
      retryAfter: res.headers.get('retry-after'),
      body: await res.json(),
    };
  }

  async function readiness() {
    const res = await fetch(`${replica.url}/readyz`);
    return {
      status: res.status,
      body: (await res.json()) as { data?: Record<string, unknown>; message?: string },
    };
  }

  it('answers 503 503-00003 while the database is unreachable, stays ready (degraded), and recovers', async () => {
    expect((await listOrganizations()).status).toBe(200);

    await front.cut();
    const down = await listOrganizations();
    expect(down).toMatchObject({
      status: 503,
      retryAfter: '5',
      body: {
        data: null,
        result: '503-00003',
        message: 'The database is unavailable; retry later.',
      },
    });
    // Still in rotation: organizations it knows are served without the database. The audit
    // log's records (these calls' among them) wait for it too, said once its writer's next
    // flush (AUDIT_FLUSH_INTERVAL_MS, a second) has failed: a readiness read before that flush
    // and one after it answer differently, so the test waits for it.
    await expect
      .poll(async () => (await readiness()).body.data?.audit_log, EVENTUALLY)
      .toBe('degraded');
    expect(await readiness()).toMatchObject({
      status: 200,
      body: {
        data: { database: 'down', keycloak: 'up', audit_log: 'degraded' },
        message: 'Degraded: database, audit_log.',
      },
    });

    await front.restore();
    expect((await listOrganizations()).status).toBe(200);
  });
});
