import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { isDatabaseUnavailable } from './database-failures.ts';
import { migrateToLatest } from './migrate.ts';

/** Whether this process may rely on the schema, and when it can. */
export interface SchemaState {
  /** True once the schema is current (migrated, or found current, by this process or another). */
  current(): boolean;
  /**
   * Resolves once the schema is current: at once unless PostgreSQL was unreachable at start.
   * Rejects when the migration in the background fails for another reason than an unreachable
   * database (a schema this release cannot run on, a lock held past its bound): the start
   * failed, as it would have at once had the database answered.
   */
  readonly ready: Promise<void>;
  /**
   * PostgreSQL answered (the readiness check saw it): a migration waiting out its backoff is
   * tried at once, rather than up to MIGRATION_RETRY_MAX_MS later; not again in the wait that
   * follows such an attempt failing (at most one attempt more per backoff period).
   */
  databaseAnswered(): void;
  /** Stops the attempts in the background (at shutdown); `ready` then never settles. */
  stop(): void;
}

/** The schema migrated by another process (a worker's supervising process): current. */
export const schemaCurrent: SchemaState = {
  current: () => true,
  ready: Promise.resolve(),
  databaseAnswered: () => undefined,
  stop: () => undefined,
};

/** The waits between attempts while PostgreSQL stays unreachable: doubling, to a ceiling. */
export const MIGRATION_RETRY_FIRST_MS = 500;
export const MIGRATION_RETRY_MAX_MS = 10_000;

/** Waits `ms`, or until `signal` aborts (rejecting then, or not): a test passes its own. */
export type RetryWait = (ms: number, signal: AbortSignal) => Promise<unknown>;

/** The wait between attempts: it does not keep the process alive. */
const retryWait: RetryWait = (ms, signal) => sleep(ms, undefined, { signal, ref: false });

/**
 * Migrates at start (migrateToLatest). When PostgreSQL cannot be reached (refused, timed out,
 * not accepting connections yet, out of slots), the start goes on without it, as a running
 * replica rides out the database's outage: the migration is tried again in the background,
 * after 0.5 s, then doubling up to 10 s between attempts, until the database answers (at once
 * when the readiness check sees it answer: `databaseAnswered`, at most once per period). Any
 * other failure of the first attempt (a schema refused, a statement cancelled, a lock held past
 * its bound) fails the start, as before. A server that answered but cancelled the migration (57014)
 * is not unreachable: trying again would run the same migration into the same limit.
 */
export async function migrateAtStart(
  db: Knex,
  logger: Logger,
  wait: RetryWait = retryWait,
): Promise<SchemaState> {
  try {
    await migrateToLatest(db, logger);
    return schemaCurrent;
  } catch (err) {
    if (!unreachable(err)) throw err;
    logger.warn(
      { err },
      'database: unreachable at start; serving without it (as a replica that loses it does), ' +
        'migrating once it answers',
    );
  }
  let current = false;
  let stopped = false;
  // Ends the wait before the next attempt, its reason saying what ended it; set only while it
  // waits.
  let waiting: AbortController | undefined;
  // Whether the database answering may end the wait: not the one after an attempt it woke
  // failed. The readiness check's pooled connection can answer while new ones are refused (out
  // of slots): /readyz, however often asked, then adds at most one attempt per backoff period.
  let wakeable = true;
  const ready = (async () => {
    for (let attempt = 1, waitMs = MIGRATION_RETRY_FIRST_MS; ; attempt++) {
      const ending = new AbortController();
      waiting = ending;
      await wait(waitMs, ending.signal).catch(() => undefined);
      waiting = undefined;
      const trigger = ending.signal.aborted ? String(ending.signal.reason) : 'the wait ended';
      if (stopped) return new Promise<void>(() => undefined);
      try {
        await migrateToLatest(db, logger);
        // Stopped meanwhile: the schema is current, but nothing that waits for it starts now.
        if (stopped) {
          logger.info('database: migrated as the process stopped');
          return new Promise<void>(() => undefined);
        }
        current = true;
        logger.info({ attempts: attempt + 1, trigger }, 'database: answering; schema current');
        return;
      } catch (err) {
        if (stopped) return new Promise<void>(() => undefined);
        if (!unreachable(err)) throw err;
        logger.warn({ err, attempts: attempt + 1 }, 'database: still unreachable');
        wakeable = trigger !== ANSWERED;
      }
      waitMs = Math.min(waitMs * 2, MIGRATION_RETRY_MAX_MS);
    }
  })();
  // The caller that exits on a failure handles it; nothing else must see it unhandled.
  ready.catch(() => undefined);
  return {
    current: () => current,
    ready,
    databaseAnswered() {
      if (wakeable) waiting?.abort(ANSWERED);
    },
    stop() {
      stopped = true;
      waiting?.abort('stopped');
    },
  };
}

/** What ends a wait when the readiness check saw the database answer. */
const ANSWERED = 'the database answered';

/** PostgreSQL could not be reached, or went away; not a statement it cancelled (57014). */
function unreachable(err: unknown): boolean {
  for (let cause = err, depth = 0; cause instanceof Error && depth < 4; depth++) {
    if ((cause as { code?: unknown }).code === '57014') return false;
    cause = cause.cause;
  }
  return isDatabaseUnavailable(err);
}
