import os from 'node:os';
import type { Knex } from 'knex';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { isDatabaseUnavailable } from '../../src/db/database-failures.ts';
import { openDatabase, type DatabaseTimeouts } from '../../src/db/database.ts';
import { MIGRATION_NAMES, migrateToLatest } from '../../src/db/migrate.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { ownDatabase } from '../helpers/postgres-server.ts';
import { startTcpFront, type TcpFront } from '../helpers/tcp-front.ts';
import { testEnv } from '../helpers/test-env.ts';

/*
 * A start's migration is bounded where it must not wait: a statement waiting on a table lock
 * another session holds, or a PostgreSQL gone silent after sign-in, fails the start instead of
 * hanging it without a word (the advisory lock's wait for another replica's migration is
 * migration-lock.test.ts'). On a database of the test's own, migrated but for the migrations
 * from one that alters audit_log_incarnations on, as a previous release left it. Port 18874
 * (relay).
 */

const database = ownDatabase('migbound');
/** The migration left pending (it adds a column to ALTERED), and those after it. */
const PENDING = MIGRATION_NAMES.slice(
  MIGRATION_NAMES.indexOf('20261129-010-audit-incarnation-retention'),
);
const ALTERED = 'audit_log_incarnations';
// statementMs: the migration's lock_timeout; sparedMs: its statement timeout and, with
// connectMs, its wait for an answer. Long enough for the test to see the migration wait, and
// for its connection to be made on a loaded machine.
const TIMEOUTS: DatabaseTimeouts = { connectMs: 2000, statementMs: 1000, sparedMs: 1500 };
/** Where the lock bound is the spared one: only silence can fail the migration first. */
const SILENCE_TIMEOUTS: DatabaseTimeouts = { ...TIMEOUTS, statementMs: TIMEOUTS.sparedMs };
/** For the migrations that are to succeed (the older schema made, the one once the lock is free). */
const GENEROUS: DatabaseTimeouts = { connectMs: 10_000, statementMs: 30_000, sparedMs: 60_000 };

const opened: Knex[] = [];
let holder: pg.Client | undefined;

async function migrator(host?: string, timeouts = TIMEOUTS): Promise<Knex> {
  const db = await openDatabase({
    databaseUrl: database.url(host),
    dataDir: os.tmpdir(),
    timeouts,
  });
  opened.push(db);
  return db;
}

/** Another session holding the altered table against any change until the test ends. */
async function lockAltered(): Promise<pg.Client> {
  holder = new pg.Client({ connectionString: database.url() });
  await holder.connect();
  await holder.query('begin');
  await holder.query(`lock table ${ALTERED} in access share mode`);
  return holder;
}

/** Sessions of this database waiting for a lock on the altered table. */
async function tableLockWaiters(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ waiting: number }>(
    `select count(*)::int as waiting from pg_locks
      where locktype = 'relation' and not granted and relation = $1::regclass`,
    [ALTERED],
  );
  return rows[0]!.waiting;
}

beforeAll(async () => {
  await database.create();
});

beforeEach(async () => {
  const db = await migrator(undefined, GENEROUS);
  await migrateToLatest(db);
  // An older schema: PENDING undone, latest first, with their own `down`.
  for (const name of PENDING.toReversed()) {
    const migration = (await import(`../../src/db/migrations/${name}.ts`)) as Knex.Migration;
    await migration.down!(db);
    await db('knex_migrations').where({ name }).delete();
  }
});

afterEach(async () => {
  await holder?.end();
  holder = undefined;
  await Promise.all(opened.splice(0).map((db) => db.destroy()));
});

afterAll(async () => {
  await database.drop();
});

describe('a start migration waiting on a table lock', () => {
  it('fails after the lock bound with an error naming the lock wait, and migrates once it is free', async () => {
    await lockAltered();
    const started = Date.now();
    const failure: unknown = await migrateToLatest(await migrator()).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toMatch(
      /waited longer than 1000 ms for a lock another session holds/,
    );
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUTS.statementMs - 50);
    await holder!.end();
    holder = undefined;
    const db = await migrator(undefined, GENEROUS);
    await migrateToLatest(db);
    expect(await db.schema.hasColumn(ALTERED, 'prior_days')).toBe(true);
  }, 60_000);
});

describe('a start migration on a connection that goes silent', () => {
  let front: TcpFront;

  beforeAll(async () => {
    const direct = new URL(testEnv().databaseUrl);
    front = await startTcpFront(18874, {
      host: direct.hostname,
      port: Number(direct.port || 5432),
    });
  });

  afterAll(async () => {
    front?.unsilence();
    await front?.cut();
  });

  it('fails once nothing answered for the connect and spared bounds', async () => {
    const locker = await lockAltered();
    const started = Date.now();
    const migration = migrateToLatest(
      await migrator(`127.0.0.1:${front.port}`, SILENCE_TIMEOUTS),
    ).then(
      () => undefined,
      (err: unknown) => err,
    );
    // The event: the migration's ALTER waits for the lock, its connection made and signed in.
    await vi.waitFor(async () => expect(await tableLockWaiters(locker)).toBe(1), {
      ...EVENTUALLY,
      interval: 20,
    });
    front.silence();
    // PostgreSQL runs the ALTER now; its answer never reaches the gateway.
    await locker.query('commit');
    const failure = await migration;
    expect(isDatabaseUnavailable(failure)).toBe(true);
    expect(failure).not.toMatchObject({ code: '55P03' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(
      SILENCE_TIMEOUTS.connectMs + SILENCE_TIMEOUTS.sparedMs,
    );
    front.unsilence();
  }, 60_000);
});
