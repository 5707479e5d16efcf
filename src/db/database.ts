import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import knex, { type Knex } from 'knex';
import ClientPgLite from 'knex-pglite';
import type { Logger } from 'pino';

export interface DatabaseOptions {
  /** External PostgreSQL; when absent an embedded PGlite database lives under `dataDir`. */
  databaseUrl?: string | undefined;
  dataDir: string;
  /** Where knex's own warnings go (a lost connection, say); without it, the console. */
  logger?: Logger;
}

/**
 * Opens the platform database: a pooled PostgreSQL connection when `databaseUrl` is set,
 * otherwise an embedded PostgreSQL (PGlite) persisted in `<dataDir>/pglite`.
 * The caller owns the returned handle and must `destroy()` it on shutdown.
 */
export async function openDatabase(opts: DatabaseOptions): Promise<Knex> {
  if (opts.databaseUrl) {
    return knex({
      client: 'pg',
      connection: opts.databaseUrl,
      // min 0 lets idle connections close, so a restarted PostgreSQL does not leave dead sockets.
      pool: { min: 0, max: 10 },
      ...(opts.logger && { log: knexLog(opts.logger) }),
    });
  }
  const filename = path.join(opts.dataDir, 'pglite');
  // PGlite only creates the last path segment, so the data directory itself must exist.
  await mkdir(filename, { recursive: true });
  // knex-pglite forces a single connection and rejects any pool setting.
  return knex({ client: ClientPgLite, connection: { filename } });
}

/** knex's log calls as JSON lines of the gateway's log (knex passes a string or an error). */
function knexLog(logger: Logger): Knex.Config['log'] {
  const line = (message: unknown): [object, string] =>
    message instanceof Error
      ? [{ err: message }, 'database']
      : [{}, `database: ${String(message)}`];
  return {
    warn: (message: unknown) => logger.warn(...line(message)),
    error: (message: unknown) => logger.error(...line(message)),
    deprecate: (method: string, alternative: string) =>
      logger.warn(`database: ${method} is deprecated, use ${alternative}`),
    debug: () => undefined,
  };
}

/** Rejects when the database cannot answer a trivial query; used by readiness probes. */
export async function checkDatabase(db: Knex): Promise<void> {
  await db.raw('select 1');
}

/** What knex's connection pool (tarn) tells of itself. */
interface PoolCounts {
  numUsed(): number;
  numFree(): number;
  numPendingAcquires(): number;
}

/** The connection pool's state, for metrics; undefined when the client keeps no pool. */
export function poolState(db: Knex): { used: number; free: number; pending: number } | undefined {
  const pool = (db.client as { pool?: PoolCounts }).pool;
  if (typeof pool?.numUsed !== 'function') return undefined;
  return { used: pool.numUsed(), free: pool.numFree(), pending: pool.numPendingAcquires() };
}
