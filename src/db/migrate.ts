import type { Knex } from 'knex';
import ClientPgLite from 'knex-pglite';
import type { Logger } from 'pino';
import { VERSION } from '../release/version.ts';
import { migrationDatabase, migrationLockMsOf } from './database.ts';
import { readableFrom, schemaVerdict } from './schema-history.ts';
import { appliedMigrations, readSchemaRecord, writeSchemaRecord } from './schema-record.ts';
import * as initial from './migrations/20261122-001-initial.ts';
import * as refreshTokenDetails from './migrations/20261125-002-refresh-token-details.ts';
import * as refreshTokenDpopJkt from './migrations/20261127-003-refresh-token-dpop-jkt.ts';
import * as auditLog from './migrations/20261128-004-audit-log.ts';
import * as auditCheckpoints from './migrations/20261128-005-audit-checkpoints.ts';
import * as auditDownloadJobs from './migrations/20261128-006-audit-download-jobs.ts';
import * as auditKeycloakPulls from './migrations/20261128-007-audit-keycloak-pulls.ts';
import * as auditLogWithoutIds from './migrations/20261128-008-audit-log-without-record-ids.ts';
import * as auditLogIncarnations from './migrations/20261129-009-audit-log-incarnations.ts';
import * as auditIncarnationRetention from './migrations/20261129-010-audit-incarnation-retention.ts';
import * as auditDownloadWholeLog from './migrations/20261129-011-audit-download-whole-log.ts';
import * as authKeycloakPulls from './migrations/20261129-012-auth-keycloak-pulls.ts';
import * as realmAlignments from './migrations/20261201-013-realm-alignments.ts';
import * as auditDownloadFirstSeq from './migrations/20261201-014-audit-download-first-seq.ts';
import * as auditAppend from './migrations/20261202-015-audit-append.ts';

interface NamedMigration {
  name: string;
  migration: Knex.Migration;
}

/**
 * Every migration, in order. Listed statically rather than globbed from disk so the same code
 * runs as TypeScript (Node strips the types), from a bundle, or from compiled output without
 * knowing file extensions.
 *
 * The rule (docs/operations.md, "Upgrades and migrations"): during a rolling upgrade the
 * previous release's replicas run on the schema these make, and a rollback of one release runs
 * the previous release's code on it too. So a release's migrations
 * - are appended, never edited, reordered or removed once released (released-migrations.json
 *   lists what each release shipped; a unit test holds this list to it);
 * - expand: new tables, and new columns nullable or with a default; nothing the previous release
 *   reads is renamed, retyped, made stricter or dropped;
 * - contract one release later: drop only what the previous release no longer reads.
 * test/integration/release-compat.test.ts runs the previous release's code on this schema.
 */
const migrations: readonly NamedMigration[] = [
  { name: '20261122-001-initial', migration: initial },
  { name: '20261125-002-refresh-token-details', migration: refreshTokenDetails },
  { name: '20261127-003-refresh-token-dpop-jkt', migration: refreshTokenDpopJkt },
  { name: '20261128-004-audit-log', migration: auditLog },
  { name: '20261128-005-audit-checkpoints', migration: auditCheckpoints },
  { name: '20261128-006-audit-download-jobs', migration: auditDownloadJobs },
  { name: '20261128-007-audit-keycloak-pulls', migration: auditKeycloakPulls },
  { name: '20261128-008-audit-log-without-record-ids', migration: auditLogWithoutIds },
  { name: '20261129-009-audit-log-incarnations', migration: auditLogIncarnations },
  { name: '20261129-010-audit-incarnation-retention', migration: auditIncarnationRetention },
  { name: '20261129-011-audit-download-whole-log', migration: auditDownloadWholeLog },
  { name: '20261129-012-auth-keycloak-pulls', migration: authKeycloakPulls },
  { name: '20261201-013-realm-alignments', migration: realmAlignments },
  { name: '20261201-014-audit-download-first-seq', migration: auditDownloadFirstSeq },
  { name: '20261202-015-audit-append', migration: auditAppend },
];

/** The names of the migrations, in order: what `knex_migrations` holds once migrated. */
export const MIGRATION_NAMES: readonly string[] = migrations.map((m) => m.name);

const migrationSource: Knex.MigrationSource<NamedMigration> = {
  getMigrations: () => Promise.resolve([...migrations]),
  getMigrationName: (m) => m.name,
  getMigration: (m) => Promise.resolve(m.migration),
};

/**
 * The PostgreSQL advisory lock every realmgate process takes around its migration: the bytes
 * of "realmgat" as one bigint, fixed forever (a process that used another key would migrate
 * beside the others). Session-level, so a process that dies holding it releases it with its
 * connection. A string: the number is beyond JavaScript's exact integers.
 */
export const MIGRATION_LOCK_KEY = '8243101811291414900';

/**
 * Applies every pending migration; a no-op when the schema is current.
 *
 * knex's own lock cannot serialise processes that start together on an empty database: each
 * creates the lock table and inserts its row before any lock exists, and two rows leave the
 * lock table unusable ("Migration table is already locked") on every later start. So on a
 * shared PostgreSQL server the processes first wait for each other on an advisory lock; whoever
 * holds it is the only migrator, so a knex lock found set, or a lock table of two rows, is what
 * a killed or racing process left and is reset before knex takes it. PGlite is one process's
 * database with one connection (which the advisory lock would hold and the migration need):
 * there the process is the only migrator by construction.
 */
export async function migrateToLatest(db: Knex, logger?: Logger): Promise<void> {
  if (db.client instanceof ClientPgLite) {
    await migrateAsOnlyMigrator(db, logger);
    return;
  }
  // Not under the request's limits: the lock waits out another process's migration, and a
  // migration may rewrite a large table. Under the migration's (migrationDatabase).
  const migrating = migrationDatabase(db);
  try {
    await migrateUnderLock(migrating, logger);
  } catch (err) {
    throw lockWaitNamed(err, migrationLockMsOf(db)) ?? err;
  } finally {
    await migrating.destroy();
  }
}

/**
 * A migration statement that waited past its lock bound (SQLSTATE 55P03, lock_timeout) as an
 * error that says so, for the start's log line; undefined for any other error.
 */
function lockWaitNamed(err: unknown, lockMs: number | undefined): Error | undefined {
  if ((err as { code?: unknown } | undefined)?.code !== '55P03') return undefined;
  return new Error(
    `database: the migration waited longer than ${lockMs === undefined ? 'lock_timeout' : `${lockMs} ms`} for a lock another session holds ` +
      'on a table it changes (pg_locks and pg_stat_activity name the session); that migration ' +
      'was rolled back, and the next start goes on from there',
    { cause: err },
  );
}

async function migrateUnderLock(db: Knex, logger?: Logger): Promise<void> {
  // One connection of the pool, held throughout: the advisory lock belongs to its session.
  const pool = db.client as ConnectionLender;
  const connection = await pool.acquireConnection();
  try {
    await waitForMigrationLock(db, connection);
    try {
      await migrateAsOnlyMigrator(db, logger);
    } finally {
      // All of the session's holds: a wait cut as the lock was granted keeps it (PostgreSQL
      // records a grant that raced the cancel), and the next wait took it once more. The
      // session takes no other advisory lock.
      await db.raw('select pg_advisory_unlock_all()').connection(connection);
    }
  } finally {
    await pool.releaseConnection(connection);
  }
}

/**
 * What ends one wait for the migration lock, not the waiting: the session's lock_timeout
 * (55P03), or its statement_timeout (57014), which comes first when the two are equal (it
 * started with the statement; an operator's cancel reads the same, and is waited past too).
 */
const WAIT_AGAIN = new Set(['55P03', '57014']);

/**
 * Waits for the migration's advisory lock as long as another process's migration holds it,
 * however long, as a series of waits PostgreSQL ends itself: each `pg_advisory_lock` is a
 * statement of the migration's pool, cut by its lock_timeout and begun again. So PostgreSQL
 * answers this connection at least that often, and one that stops answering (hung, or the path
 * to it dropping every packet) fails the start within the pool's answer deadline, as it does
 * any migration statement, instead of holding it for ever. Another waiter may be granted the
 * lock between two waits: whichever migrates first, the others find the schema current.
 */
async function waitForMigrationLock(db: Knex, connection: unknown): Promise<void> {
  for (;;) {
    try {
      await db
        .raw('select pg_advisory_lock(?::bigint)', [MIGRATION_LOCK_KEY])
        .connection(connection);
      return;
    } catch (err) {
      const { code } = err as { code?: unknown };
      if (typeof code === 'string' && WAIT_AGAIN.has(code)) continue;
      throw new Error(
        `database: waiting for another process's migration (advisory lock ${MIGRATION_LOCK_KEY}) ` +
          `failed: ${err instanceof Error ? err.message : String(err)}`,
        { cause: err },
      );
    }
  }
}

/** This release cannot run on the database it was given; the message says why and what to do. */
export class SchemaRefusedError extends Error {
  override name = 'SchemaRefusedError';
}

/**
 * What the one migrator does: reads what the database has applied and its record of which
 * releases may run on it (schema-history.ts decides); refuses a schema this release cannot run
 * on; leaves alone one a newer release made that it may run on (knex would refuse its unknown
 * migrations: "migration directory is corrupt"); otherwise applies what is missing and, when it
 * did (or no record exists yet), records which releases may run on the result.
 */
async function migrateAsOnlyMigrator(db: Knex, logger?: Logger): Promise<void> {
  const applied = await appliedMigrations(db);
  const record = await readSchemaRecord(db);
  const verdict = schemaVerdict(VERSION, MIGRATION_NAMES, applied, record);
  if (verdict.kind === 'refuse') {
    throw new SchemaRefusedError(
      `realmgate ${VERSION} cannot run on this database: ${verdict.reason}`,
    );
  }
  if (verdict.kind === 'newer') {
    logger?.warn(
      { version: VERSION, migratedBy: record?.migratedBy, unknownMigrations: verdict.unknown },
      'database: migrated by a newer release whose schema this one runs on; nothing migrated',
    );
    return;
  }
  await freeLeftKnexLock(db, logger);
  const [, done] = (await db.migrate.latest({ migrationSource })) as [number, string[]];
  if (done.length > 0 || !record) {
    await writeSchemaRecord(db, {
      readableFrom: readableFrom(VERSION, MIGRATION_NAMES),
      migratedBy: VERSION,
    });
  }
  if (done.length > 0) logger?.info({ version: VERSION, migrations: done }, 'database: migrated');
}

/** The calls of knex's client that lend one connection of its pool (typed `any` by knex). */
interface ConnectionLender {
  acquireConnection(): Promise<unknown>;
  releaseConnection(connection: unknown): Promise<void>;
}

/**
 * Resets knex's lock table to its one free row when it is anything else; called only by the one
 * migrator, so nobody else can be holding the knex lock.
 */
async function freeLeftKnexLock(db: Knex, logger?: Logger): Promise<void> {
  if (!(await db.schema.hasTable('knex_migrations_lock'))) return;
  const rows = await db('knex_migrations_lock').select<{ is_locked: number }[]>('is_locked');
  if (rows.length === 1 && rows[0]!.is_locked === 0) return;
  logger?.warn(
    { lockRows: rows.length, locked: rows.filter((row) => row.is_locked !== 0).length },
    'database: a migration lock left by a stopped or racing process is freed',
  );
  await db.migrate.forceFreeMigrationsLock();
}
