import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { Knex } from 'knex';
import pg from 'pg';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { openDatabase, type DatabaseTimeouts } from '../../src/db/database.ts';
import { MIGRATION_LOCK_KEY, MIGRATION_NAMES, migrateToLatest } from '../../src/db/migrate.ts';
import { onPostgresServer } from '../helpers/postgres-server.ts';

/*
 * Replicas that start together migrate one fresh platform database at the same moment (the
 * production profile of docker-compose.yml does). Each migrator here is a knex pool of its own,
 * as each replica has, on a database of the test's own, made empty for every test.
 */

const SERVER = (process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test').replace(
  /\/[^/]*$/,
  '',
);
const database = `realmgate_migrate_${randomBytes(4).toString('hex')}`;
const opened: Knex[] = [];

async function migrator(timeouts?: DatabaseTimeouts): Promise<Knex> {
  const db = await openDatabase({
    databaseUrl: `${SERVER}/${database}`,
    dataDir: os.tmpdir(),
    timeouts,
  });
  opened.push(db);
  return db;
}

/** The tables the migrations made, the migrations recorded, and knex's lock rows. */
async function schemaOf(db: Knex) {
  const tables = await db('information_schema.tables')
    .where({ table_schema: 'public' })
    .orderBy('table_name')
    .pluck<string[]>('table_name');
  const applied = await db('knex_migrations').orderBy('id').pluck<string[]>('name');
  const lock = await db('knex_migrations_lock').select('is_locked');
  return { tables, applied, lock };
}

const MIGRATED = {
  tables: [
    // The audit log (src/audit/), its checkpoints, retention, signing keys, download jobs and
    // Keycloak event cursors, where each organization's log begins for its readers.
    'audit_checkpoints',
    'audit_download_jobs',
    'audit_keycloak_pulls',
    'audit_log',
    'audit_log_heads',
    'audit_log_incarnations',
    'audit_retention',
    'audit_signing_keys',
    // The auth area's Keycloak event cursors (credential changes made in Keycloak).
    'auth_keycloak_pulls',
    'knex_migrations',
    'knex_migrations_lock',
    'operations',
    'organizations',
    // Which releases may run on the schema (src/db/schema-record.ts).
    'realmgate_schema',
    'refresh_token_details',
    'workspaces',
  ],
  applied: [...MIGRATION_NAMES],
  lock: [{ is_locked: 0 }],
};

describe('migrations when several processes start together', () => {
  beforeEach(async () => {
    await onPostgresServer(SERVER, `create database ${database}`);
  });

  afterEach(async () => {
    await Promise.all(opened.splice(0).map((db) => db.destroy()));
    await onPostgresServer(SERVER, `drop database if exists ${database} with (force)`);
  });

  afterAll(async () => {
    await onPostgresServer(SERVER, `drop database if exists ${database} with (force)`);
  });

  it('six migrators on a fresh database all succeed, and the schema is made once', async () => {
    const migrators = await Promise.all(Array.from({ length: 6 }, () => migrator()));
    const outcomes = await Promise.allSettled(migrators.map((db) => migrateToLatest(db)));
    expect(outcomes.map((o) => (o.status === 'rejected' ? String(o.reason) : o.status))).toEqual(
      migrators.map(() => 'fulfilled'),
    );
    expect(await schemaOf(migrators[0]!)).toEqual(MIGRATED);
  });

  it('a migrator waits while another holds the migration lock, then finds the schema current', async () => {
    // Another process in the middle of its migration: it holds the advisory lock.
    const other = new pg.Client({ connectionString: `${SERVER}/${database}` });
    await other.connect();
    try {
      await other.query('select pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
      const db = await migrator();
      let done = false;
      const migration = migrateToLatest(db).then(() => (done = true));
      // The event: PostgreSQL shows the migrator waiting for the advisory lock.
      await vi.waitFor(async () => expect(await lockWaiters(other)).toBe(1), { timeout: 10_000 });
      expect(done).toBe(false);
      expect(await db.schema.hasTable('knex_migrations')).toBe(false);
      await other.query('select pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]);
      await migration;
      expect(await schemaOf(db)).toEqual(MIGRATED);
    } finally {
      await other.end();
    }
  });

  it('a migrator waits for the lock past the statement timeout, and migrates', async () => {
    const other = new pg.Client({ connectionString: `${SERVER}/${database}` });
    await other.connect();
    try {
      await other.query('select pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
      // The pool's limits cut a request's statement after 300 ms, and drop a connection
      // silent for 500 ms (spared work and the migration's statements 600 ms); the wait for
      // the advisory lock is under none.
      const db = await migrator({ connectMs: 200, statementMs: 300, sparedMs: 400 });
      const migration = migrateToLatest(db);
      await vi.waitFor(async () => expect(await lockWaiters(other)).toBe(1), { timeout: 10_000 });
      // Past both limits, the migrator still waits for the lock.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(await lockWaiters(other)).toBe(1);
      await other.query('select pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]);
      await migration;
      expect(await schemaOf(db)).toEqual(MIGRATED);
    } finally {
      await other.end();
    }
  });

  it('frees the knex lock a killed migrator left set, and a lock table two racing ones left', async () => {
    const db = await migrator();
    await migrateToLatest(db);
    // A process killed between taking knex's lock and freeing it.
    await db('knex_migrations_lock').update({ is_locked: 1 });
    await migrateToLatest(db);
    expect(await schemaOf(db)).toEqual(MIGRATED);
    // Two processes that each inserted the lock row (what knex alone does when they start
    // together): no row can be taken as the one lock, so knex would refuse every start.
    await db('knex_migrations_lock').insert({ is_locked: 0 });
    await migrateToLatest(await migrator());
    expect(await schemaOf(db)).toEqual(MIGRATED);
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
