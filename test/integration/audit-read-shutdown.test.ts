import knex, { type Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, callApi } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { ownDatabase } from '../helpers/postgres-server.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';

/*
 * A download job's run reads the log under the spared timeout (5 minutes): at shutdown, that
 * read only must not hold the database's close, and the process, past the grace period. Here
 * the run waits for a lock the test holds on the log until the gateway has closed: a close that
 * waited for the read would never end. On a database of the test's own, whose lock holds up no
 * other suite. Ports 19652/19653.
 */

const database = ownDatabase('down');

describe('spared audit reads at shutdown', () => {
  let db: Knex;
  let replica: Replica;
  let closed: Promise<void> | undefined;
  let admin: TestUser;
  let lock: Knex.Transaction | undefined;

  beforeAll(async () => {
    await database.create();
    // A short statement timeout: the audit writer's insert behind the lock gives up soon.
    replica = await startReplica(19652, {
      DATABASE_URL: database.url(),
      DATABASE_STATEMENT_TIMEOUT_MS: '1000',
      SHUTDOWN_GRACE_SECONDS: '1',
    });
    db = knex({ client: 'pg', connection: database.url(), pool: { min: 0, max: 2 } });
    admin = await createUser('master');
  }, 120_000);

  afterAll(async () => {
    await lock?.rollback();
    await (closed ?? replica?.gateway.close());
    await db?.destroy();
    await database.drop();
  });

  /** The download job runs PostgreSQL holds behind the test's lock now. */
  async function runsBlocked(): Promise<number> {
    const { rows } = await db.raw<{ rows: { blocked: string }[] }>(
      `select count(*) as blocked from pg_stat_activity
       where datname = ? and wait_event_type = 'Lock' and query like 'select max(%'`,
      [database.name],
    );
    return Number(rows[0]!.blocked);
  }

  it('cancels a download job’s read at shutdown: the gateway closes while the read is held', async () => {
    lock = await db.transaction();
    await lock.raw('lock table audit_log in access exclusive mode');
    const started = await callApi('/api/platform/auditlog/download', basicAuth(admin), {
      base: replica.url,
      method: 'POST',
      body: { ts_from: '2026-01-01 00:00:00', ts_to: '2026-01-31 23:59:59' },
    });
    expect(started.status).toBe(200);
    await expect.poll(runsBlocked, EVENTUALLY).toBe(1);
    closed = replica.gateway.close();
    await closed;
    // The run was given up, not left for a replica to take as lost: it failed, said so.
    const [job] = await db<{ status: string }>('audit_download_jobs').select('status');
    expect(job?.status).toBe('Failed');
  }, 60_000);
});
