import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import knex, { type Knex } from 'knex';
import ClientPgLite from 'knex-pglite';
import type { Logger } from 'pino';
import { DATABASE_POOL_SIZE } from './pool-size.ts';

export interface DatabaseOptions {
  /** External PostgreSQL; when absent an embedded PGlite database lives under `dataDir`. */
  databaseUrl?: string | undefined;
  dataDir: string;
  /** Where knex's own warnings go (a lost connection, say); without it, the console. */
  logger?: Logger;
  /**
   * PostgreSQL's limits (DATABASE_CONNECT_TIMEOUT_MS, DATABASE_STATEMENT_TIMEOUT_MS,
   * DATABASE_SPARED_TIMEOUT_MS); none without.
   */
  timeouts?: DatabaseTimeouts | undefined;
}

export interface DatabaseTimeouts {
  connectMs: number;
  statementMs: number;
  /** What runSpared's work may take instead of `statementMs`. */
  sparedMs: number;
}

/** The limits each pool was opened with, for runSpared (knex keeps no place for them). */
const limitsOf = new WeakMap<Knex, DatabaseTimeouts>();

/**
 * Opens the platform database: a pooled PostgreSQL connection when `databaseUrl` is set,
 * otherwise an embedded PostgreSQL (PGlite) persisted in `<dataDir>/pglite`.
 * The caller owns the returned handle and must `destroy()` it on shutdown.
 */
export async function openDatabase(opts: DatabaseOptions): Promise<Knex> {
  if (opts.databaseUrl) {
    const db = knex({
      client: 'pg',
      connection: pgConnection(opts.databaseUrl, opts.timeouts),
      // min 0 lets idle connections close, so a restarted PostgreSQL does not leave dead sockets.
      pool: {
        min: 0,
        max: DATABASE_POOL_SIZE,
        ...(opts.timeouts && { afterCreate: dropWhenSilent(opts.timeouts) }),
      },
      // A request waits for a connection no longer than one takes to be made or to answer; a
      // connection that cannot be made fails its waiter sooner (knex propagates the error).
      ...(opts.timeouts && { acquireConnectionTimeout: answerMs(opts.timeouts) }),
      ...(opts.logger && { log: knexLog(opts.logger) }),
    });
    if (opts.timeouts) limitsOf.set(db, opts.timeouts);
    return db;
  }
  const filename = path.join(opts.dataDir, 'pglite');
  // PGlite only creates the last path segment, so the data directory itself must exist.
  await mkdir(filename, { recursive: true });
  // knex-pglite forces a single connection and rejects any pool setting.
  return knex({ client: ClientPgLite, connection: { filename } });
}

/** The limits the configuration sets. */
export function databaseTimeoutsOf(config: {
  DATABASE_CONNECT_TIMEOUT_MS: number;
  DATABASE_STATEMENT_TIMEOUT_MS: number;
  DATABASE_SPARED_TIMEOUT_MS: number;
}): DatabaseTimeouts {
  return {
    connectMs: config.DATABASE_CONNECT_TIMEOUT_MS,
    statementMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
    sparedMs: config.DATABASE_SPARED_TIMEOUT_MS,
  };
}

/** pg's connection settings: the URL as given, and the limits when there are some. */
function pgConnection(url: string, timeouts: DatabaseTimeouts | undefined): string | object {
  if (!timeouts) return url;
  return {
    connectionString: url,
    connectionTimeoutMillis: timeouts.connectMs,
    // The server cancels a statement past it (57014), and the connection stays usable.
    statement_timeout: timeouts.statementMs,
  };
}

/**
 * How long the gateway waits for any answer on a connection before it drops it: past the
 * statement timeout (the spared one, for spared work) the server would have answered 57014,
 * so silence this long is a hung server or a black-holed path, which TCP alone notices only
 * after many minutes.
 */
const answerMs = (timeouts: DatabaseTimeouts) => timeouts.connectMs + timeouts.statementMs;
const sparedAnswerMs = (timeouts: DatabaseTimeouts) => timeouts.connectMs + timeouts.sparedMs;

/**
 * The longest spared work of `statements` statements may take on `db` before it fails: the wait
 * for a connection, then each statement's wait for an answer (`sparedAnswerMs`); undefined for
 * a pool opened without limits.
 */
export function sparedWorkMsOf(db: Knex, statements: number): number | undefined {
  const timeouts = limitsOf.get(db);
  return timeouts && answerMs(timeouts) + statements * sparedAnswerMs(timeouts);
}

/** What of pg's client this module touches. */
interface PgClient {
  query(config: unknown, callback: (err: Error | null, result: unknown) => void): unknown;
  connection: { stream: { destroy(err?: Error): void } };
  /** The server process of the connection: what `pg_cancel_backend` takes. */
  processID: number;
  [SPARED]?: boolean;
}

/** Marks a connection lent to work that may run long (runSpared): the spared answer deadline. */
const SPARED = Symbol('realmgate.spared');

/**
 * knex's `afterCreate` hook: a query without an answer in time (`answerMs`; `sparedAnswerMs`
 * on a connection lent to runSpared, or on any of a `spared` pool's) destroys its connection,
 * which fails the query (and any queued behind it) with pg's "Connection terminated
 * unexpectedly" (a 503) and lets the pool make a new one. pg's own `query_timeout` would leave
 * the query hanging on the connection, and every later query on it behind.
 */
function dropWhenSilent(timeouts: DatabaseTimeouts, spared = false) {
  return (client: PgClient, done: (err: Error | null, client: PgClient) => void) => {
    const query = client.query.bind(client);
    client.query = (config, callback) => {
      if (typeof callback !== 'function') return query(config, callback);
      const ms = spared || client[SPARED] ? sparedAnswerMs(timeouts) : answerMs(timeouts);
      const timer = setTimeout(() => {
        const err = new Error(`no answer from PostgreSQL in ${ms} ms`);
        client.connection.stream.destroy(Object.assign(err, { code: 'ETIMEDOUT' }));
      }, ms);
      return query(config, (err, result) => {
        clearTimeout(timer);
        callback(err, result);
      });
    };
    done(null, client);
  };
}

/** What knex's client lends of its pool; not in its typings. */
interface ConnectionLender {
  acquireConnection(): Promise<PgClient>;
  releaseConnection(connection: PgClient): Promise<void>;
}

/**
 * Runs `work` in a transaction under the spared limit instead of the request's: its
 * `statement_timeout` (`SET LOCAL`) and its answer deadline are `sparedMs`'s, so it runs past
 * the request limits but never for ever (a lock another session holds, a connection gone
 * silent: it fails like a request, 57014 or the connection dropped). For the work that
 * legitimately runs long (audit exports, download jobs, retention pruning); a request's own
 * queries never go here. A pool opened without limits spares without any (statement_timeout
 * 0). `config`: knex's transaction settings (isolation, read only). Once `signal` aborts (a
 * shutdown), the statement running is cancelled (57014, the transaction rolled back): for
 * work that only reads, which a shutdown need not wait for. Work whose signal aborted before
 * it began (while it waited for its connection too) does not begin: it fails with the
 * signal's reason.
 */
export async function runSpared<T>(
  db: Knex,
  work: (trx: Knex.Transaction) => Promise<T>,
  config: Knex.TransactionConfig = {},
  signal?: AbortSignal,
): Promise<T> {
  // An abort listener added once the signal has aborted never runs: its abort is read here.
  signal?.throwIfAborted();
  if (db.client instanceof ClientPgLite) return db.transaction(work, config);
  const pool = db.client as ConnectionLender;
  const sparedMs = limitsOf.get(db)?.sparedMs ?? 0;
  const connection = await pool.acquireConnection();
  connection[SPARED] = true;
  // Through another connection of the pool, as knex cancels a query past its timeout; the
  // connection is kept until the cancel is done, so that it never reaches its next borrower.
  let cancelling: Promise<unknown> | undefined;
  const cancel = () => {
    cancelling = db.raw('select pg_cancel_backend(?)', [connection.processID]).catch(() => {});
  };
  signal?.addEventListener('abort', cancel, { once: true });
  try {
    // Aborted while the connection was awaited.
    signal?.throwIfAborted();
    return await db.transaction(
      async (trx) => {
        // A number the configuration checked, not an outside input; SET takes no parameter.
        await trx.raw(`set local statement_timeout = ${Math.trunc(sparedMs)}`);
        return work(trx);
      },
      { ...config, connection },
    );
  } finally {
    signal?.removeEventListener('abort', cancel);
    await cancelling;
    connection[SPARED] = false;
    await pool.releaseConnection(connection);
  }
}

/**
 * A second pool on the same database for the migration; the caller destroys it. Its statements
 * are spared work: a table rewrite runs past the request's statement timeout, up to
 * `sparedMs`, and its connection may stay silent as long as spared work's. And each waits for a
 * table lock at most `migrationLockMs`: a session holding a table the migration alters fails
 * the start (55P03) instead of hanging it, and the requests queued behind the migration's lock
 * wait no longer than a request may run. The wait for another process's migration (its advisory
 * lock) is a series of such waits, begun again as each ends (migrate.ts). A pool opened without
 * limits migrates without any.
 * PGlite's database has no limits and one connection: the same handle, which the caller must
 * not destroy.
 */
export function migrationDatabase(db: Knex): Knex {
  if (db.client instanceof ClientPgLite) return db;
  const config = (db.client as { config: Knex.Config }).config;
  const timeouts = limitsOf.get(db);
  // knex keeps a URL parsed; the connect timeout stays.
  const connection = { ...(config.connection as Record<string, unknown>) };
  delete connection.statement_timeout;
  if (timeouts) {
    connection.statement_timeout = timeouts.sparedMs;
    connection.lock_timeout = migrationLockMs(timeouts);
  }
  return knex({
    ...config,
    connection,
    acquireConnectionTimeout: undefined,
    pool: { min: 0, max: 2, ...(timeouts && { afterCreate: dropWhenSilent(timeouts, true) }) },
  });
}

/**
 * How long a migration statement waits for a lock: as long as a request may run, never past its
 * own statement timeout (the spared one, which would cancel the wait first, in words that do not
 * name the lock, when it is not the longer).
 */
const migrationLockMs = (timeouts: DatabaseTimeouts) =>
  Math.min(timeouts.statementMs, timeouts.sparedMs);

/** migrationLockMs of the limits `db` was opened with; undefined without limits. */
export function migrationLockMsOf(db: Knex): number | undefined {
  const timeouts = limitsOf.get(db);
  return timeouts && migrationLockMs(timeouts);
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
