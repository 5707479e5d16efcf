import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { Writable } from 'node:stream';
import type { Knex } from 'knex';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.ts';
import { migrateAtStart } from '../../src/db/migrate-at-start.ts';
import { MIGRATION_LOCK_KEY } from '../../src/db/migrate.ts';
import { createLogger } from '../../src/http/logger.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { onPostgresServer } from '../helpers/postgres-server.ts';
import { startDatabaseRelay, type DatabaseRelay } from '../helpers/tcp-front.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * The migration in the background of a process started while PostgreSQL was unreachable, as the
 * process stops: an attempt under way when the stop comes may still succeed, and then nothing
 * that waits for the schema (the demo's data, the workers' queries) starts. A database of the
 * test's own on the test PostgreSQL, behind a relay on port 19774.
 */
describe('the migration in the background of a process that stops', () => {
  const server = new URL(testEnv().databaseUrl);
  server.pathname = '';
  const serverUrl = server.href.replace(/\/$/, '');
  const database = `realmgate_migrate_stop_${randomBytes(4).toString('hex')}`;
  let relay: DatabaseRelay;
  let db: Knex | undefined;
  let other: pg.Client | undefined;

  beforeAll(async () => {
    await onPostgresServer(serverUrl, `create database ${database}`);
    relay = await startDatabaseRelay(19774);
  });

  afterAll(async () => {
    await other?.end();
    await db?.destroy();
    await relay?.cut();
    await onPostgresServer(serverUrl, `drop database if exists ${database} with (force)`);
  });

  it('succeeds after stop() and resolves nothing: nothing starts once the process stops', async () => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const text of chunk.toString().split('\n').filter(Boolean)) {
          lines.push(JSON.parse(text) as Record<string, unknown>);
        }
        done();
      },
    });
    await relay.cut();
    const relayed = new URL(relay.databaseUrl);
    relayed.pathname = `/${database}`;
    db = await openDatabase({ databaseUrl: relayed.href, dataDir: os.tmpdir() });
    const schema = await migrateAtStart(db, createLogger('info', sink));
    expect(schema.current()).toBe(false);

    // Another process in the middle of its migration holds the lock: the next attempt waits.
    other = new pg.Client({ connectionString: `${serverUrl}/${database}` });
    await other.connect();
    await other.query('select pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
    await relay.restore();
    await expect.poll(() => lockWaiters(other!), EVENTUALLY).toBe(1);

    schema.stop();
    const outcome = Promise.race([
      schema.ready.then(() => 'ready'),
      expect
        .poll(
          () => lines.some((l) => l.msg === 'database: migrated as the process stopped'),
          EVENTUALLY,
        )
        .toBe(true)
        .then(() => 'stopped'),
    ]);
    await other.query('select pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]);
    expect(await outcome).toBe('stopped');
  });
});

/** Sessions of this database waiting for the migration's advisory lock (a bigint key). */
async function lockWaiters(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ waiting: number }>(
    `select count(*)::int as waiting from pg_locks
      where locktype = 'advisory' and not granted and objsubid = 1
        and database = (select oid from pg_database where datname = current_database())
        and ((classid::bigint << 32) | objid::bigint) = $1::bigint`,
    [MIGRATION_LOCK_KEY],
  );
  return rows[0]!.waiting;
}
