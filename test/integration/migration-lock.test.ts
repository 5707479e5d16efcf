import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { Knex } from 'knex';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { isDatabaseUnavailable } from '../../src/db/database-failures.ts';
import { openDatabase, type DatabaseTimeouts } from '../../src/db/database.ts';
import { MIGRATION_LOCK_KEY, MIGRATION_NAMES, migrateToLatest } from '../../src/db/migrate.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { onPostgresServer } from '../helpers/postgres-server.ts';
import { startDatabaseRelay, type DatabaseRelay } from '../helpers/tcp-front.ts';

/*
 * Replicas that start together migrate one fresh platform database at the same moment (the
 * production profile of docker-compose.yml does). Each migrator here is a knex pool of its own,
 * as each replica has, on a database of the test's own, made empty for every test. Port 18875
 * (a relay in front of PostgreSQL).
 */

const SERVER = (process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test').replace(
  /\/[^/]*$/,
  '',
);
const database = `realmgate_migrate_${randomBytes(4).toString('hex')}`;
const opened: Knex[] = [];

/** A replica's pool on the test's database, directly or through `serverUrl` (a relay). */
async function migrator(timeouts?: DatabaseTimeouts, serverUrl = SERVER): Promise<Knex> {
  const db = await openDatabase({
    databaseUrl: `${serverUrl}/${database}`,
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
    // Which realms were found aligned, for which URL (src/platform/realm-alignments.repo.ts).
    'realm_alignments',
    // Which releases may run on the schema (src/db/schema-record.ts).
    'realmgate_schema',
    'refresh_token_details',
    'workspaces',
  ],
  applied: [...MIGRATION_NAMES],
  lock: [{ is_locked: 0 }],
};

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

describe('migrations when several processes start together', () => {
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
      await vi.waitFor(async () => expect(await lockWaiters(other)).toBe(1), EVENTUALLY);
      expect(done).toBe(false);
      expect(await db.schema.hasTable('knex_migrations')).toBe(false);
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

describe("the wait for another process's migration, when PostgreSQL answers and when it goes silent", () => {
  // A request's statement is cut after 1 s; the migration's after 2 s, its table locks waited
  // for at most 1 s, and its connection dropped after 3 s without an answer. Short beside the
  // waits the tests see outlast them, long enough for the connections and migration statements
  // that are to succeed on a loaded machine.
  const TIMEOUTS: DatabaseTimeouts = { connectMs: 1000, statementMs: 1000, sparedMs: 2000 };
  const ANSWER_MS = TIMEOUTS.connectMs + TIMEOUTS.sparedMs;
  let relay: DatabaseRelay;
  let relayServer: string;
  let other: pg.Client;
  let otherPid: number;

  beforeAll(async () => {
    relay = await startDatabaseRelay(18875);
    relayServer = relay.databaseUrl.replace(/\/[^/]*$/, '');
  });

  afterAll(async () => {
    relay?.unsilence();
    await relay?.cut();
  });

  beforeEach(async () => {
    // Another replica in the middle of its migration: it holds the advisory lock.
    other = new pg.Client({ connectionString: `${SERVER}/${database}` });
    await other.connect();
    await other.query('select pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
    const { rows } = await other.query<{ pid: number }>('select pg_backend_pid() as pid');
    otherPid = rows[0]!.pid;
  });

  afterEach(async () => {
    relay.unsilence();
    await other.end();
  });

  // Where the request's statement timeout is the spared one, the migration's statement_timeout
  // equals its lock_timeout and ends each wait first (57014, not 55P03).
  it.each([
    ['a lock bound under the statement timeout', TIMEOUTS],
    ['a lock bound equal to it', { ...TIMEOUTS, statementMs: TIMEOUTS.sparedMs }],
  ])(
    'waits past every statement and answer bound while the other migrates, then migrates and frees the lock (%s)',
    async (_, timeouts) => {
      const db = await migrator(timeouts, relayServer);
      const migration = migrateToLatest(db);
      // Awaited below; a failure meanwhile is reported there, not as an unhandled rejection.
      migration.catch(() => undefined);
      // The event: one session, the migrator's, still waiting for the lock well past the bounds
      // that cut a statement or drop a silent connection (the age of its connection, as
      // PostgreSQL counts it).
      const waiter = await vi.waitFor(
        async () => {
          const waiting = await lockWaiterSessions(other);
          expect(waiting).toHaveLength(1);
          expect(waiting[0]!.ageMs).toBeGreaterThan(3 * ANSWER_MS);
          return waiting[0]!;
        },
        { ...EVENTUALLY, timeout: 3 * ANSWER_MS + EVENTUALLY.timeout },
      );
      expect(await db.schema.hasTable('knex_migrations')).toBe(false);
      await other.query('select pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]);
      await migration;
      expect(await schemaOf(db)).toEqual(MIGRATED);
      // The migrator let the lock go once it had migrated, and closed the session it waited on.
      await vi.waitFor(
        async () => expect(await sessionsOf(other)).not.toContain(waiter.pid),
        EVENTUALLY,
      );
      const { rows } = await other.query<{ taken: boolean }>(
        'select pg_try_advisory_lock($1::bigint) as taken',
        [MIGRATION_LOCK_KEY],
      );
      expect(rows[0]!.taken).toBe(true);
    },
    120_000,
  );

  it('fails within the answer bound, naming the wait, when PostgreSQL goes silent during it', async () => {
    const db = await migrator(TIMEOUTS, relayServer);
    const migration = migrateToLatest(db).then(
      () => new Error('the migration went on while another process held the lock'),
      (err: unknown) => err,
    );
    await vi.waitFor(async () => expect(await lockWaiters(other)).toBe(1), {
      ...EVENTUALLY,
      interval: 20,
    });
    relay.silence();
    const silenced = Date.now();
    // A bound, not a wait for an event: a migrator that hangs here hangs for ever.
    const HANG_MS = 10 * ANSWER_MS;
    let bound: NodeJS.Timeout | undefined;
    const failure = await Promise.race([
      migration,
      new Promise<string>((resolve) => {
        bound = setTimeout(() => resolve(`still waiting ${HANG_MS} ms after the silence`), HANG_MS);
      }),
    ]);
    clearTimeout(bound);
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toMatch(
      new RegExp(
        `waiting for another process's migration \\(advisory lock ${MIGRATION_LOCK_KEY}\\)`,
      ),
    );
    expect(isDatabaseUnavailable(failure)).toBe(true);
    // Within the answer bound, not a statement's or TCP's: its own length again as slack for a
    // loaded machine, far under the hang bound above.
    expect(Date.now() - silenced).toBeLessThan(2 * ANSWER_MS);
    // Once the path answers again, the failed migrator has left no session behind.
    relay.unsilence();
    await vi.waitFor(async () => expect(await sessionsOf(other)).toEqual([otherPid]), EVENTUALLY);
  }, 120_000);
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

/** The sessions of this database waiting for the migration's advisory lock, with their age. */
async function lockWaiterSessions(client: pg.Client): Promise<{ pid: number; ageMs: number }[]> {
  const { rows } = await client.query<{ pid: number; ageMs: number }>(
    `select a.pid, (extract(epoch from clock_timestamp() - a.backend_start) * 1000)::int as "ageMs"
       from pg_locks l join pg_stat_activity a on a.pid = l.pid
      where l.locktype = 'advisory' and not l.granted and l.objsubid = 1
        and l.database = (select oid from pg_database where datname = current_database())
        and ((l.classid::bigint << 32) | l.objid::bigint) = $1::bigint`,
    [MIGRATION_LOCK_KEY],
  );
  return rows;
}

/** The process ids of the client sessions connected to this database. */
async function sessionsOf(client: pg.Client): Promise<number[]> {
  const { rows } = await client.query<{ pid: number }>(
    `select pid from pg_stat_activity
      where datname = current_database() and backend_type = 'client backend' order by pid`,
  );
  return rows.map((row) => row.pid);
}
