import { setTimeout as sleep } from 'node:timers/promises';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { ReadinessReport } from '../http/health.router.ts';
import { refusedForGood } from '../db/database-failures.ts';
import { every } from '../time/every.ts';
import { within } from '../time/within.ts';
import {
  createBatchAppender,
  UnwritableRecordError,
  type AuditEvent,
  type BatchMark,
} from './audit-batch.ts';

export type { AuditEvent } from './audit-batch.ts';

/**
 * Between a shutdown's tries to write the spool: a reset connection or a failover is over in
 * moments, and a database that refuses at once is not asked in a tight loop.
 */
const CLOSE_RETRY_PAUSE_MS = 200;

/**
 * Records written to the database, or lost (the spool full, shutdown while it was down, or one
 * refused for good: by the database, or no row could be made of it).
 */
export const AUDIT_RECORD_OUTCOMES = ['written', 'lost'] as const;
export type AuditRecordOutcome = (typeof AUDIT_RECORD_OUTCOMES)[number];

/** What the writer counts (metrics/metrics.ts implements it). */
export interface AuditMetrics {
  auditRecords(outcome: AuditRecordOutcome, count: number): void;
}

export interface AuditWriter {
  /**
   * Spools one record; it is written in the next batch. Never waits, never throws. False when
   * it was not taken (the spool full, or after close): lost, counted and said in readiness.
   */
  record(event: AuditEvent): boolean;
  /**
   * As `record`, for a caller that offers a record it refused again later (the Keycloak event
   * pull keeps its cursor before it): a refusal is no loss, so it is neither counted as one nor
   * said in readiness.
   */
  offer(event: AuditEvent): boolean;
  /**
   * Writes everything spooled until now (not what comes meanwhile); rejects when the database
   * refuses.
   */
  flush(): Promise<void>;
  /** For readiness: degraded while records wait for the database, or once any was lost. */
  readiness(): Promise<ReadinessReport>;
  /**
   * Writes what is spooled, trying again after a failed write, for up to `graceMs`; then stops
   * (what is still spooled is lost).
   */
  close(graceMs: number): Promise<void>;
}

/**
 * The one writer of a process's audit records: they wait in a spool (memory, at most
 * `spoolMax`) and are written in batches of up to `batchMax`, every `intervalMs` or as soon as
 * a batch is full, in the order they were recorded. While the database is down they stay in the
 * spool and are written, still in order, once it is back; a record that finds the spool full is
 * lost, counted and said in readiness. A record the database refuses whatever the attempt (a
 * value it cannot hold: `isolate` below), or that no row can be made of, is lost the same way,
 * alone: the others of its batch and those after it are written.
 *
 * Each batch is one transaction (audit-batch.ts): writers of several replicas append to one log
 * one batch after the other, and the log keeps one order and one chain. A batch retried after an
 * error that may have followed its commit is written again only if the record its attempt last
 * placed is not there.
 */
export function createAuditWriter(deps: {
  db: Knex;
  logger: Logger;
  metrics: AuditMetrics;
  spoolMax: number;
  batchMax: number;
  intervalMs: number;
}): AuditWriter {
  const { db, logger, metrics, spoolMax, batchMax } = deps;
  // A queue as an array and the index of its first: shifting 100,000 records one by one would
  // copy them every time.
  let spool: AuditEvent[] = [];
  let first = 0;
  // Records spooled and settled (written, or refused for good) since the start, never reset: a
  // flush's mark is a count of the first (`first` moves back when the spool is compacted).
  let spooled = 0;
  let settled = 0;
  let lost = 0;
  let writing: Promise<void> | undefined;
  let failing: unknown;
  // The batch at the head of the spool may have committed when its attempt failed: this tells.
  let unclear: BatchMark | undefined;
  // While a batch refused for good is halved to find the record the database refuses: the size
  // of the batches, until that record is found, or at the latest up to the end (a count of
  // settled records) of the first one refused.
  let isolating: { size: number; until: number } | undefined;
  let closed = false;
  const size = () => spool.length - first;
  const appender = createBatchAppender(db);

  // A failed write is logged by writeBatches, once an outage; the next tick tries again.
  const ticks = every(
    deps.intervalMs,
    () => {
      logLosses();
      return writeSpooled();
    },
    { onError: () => undefined },
  );

  // Losses are logged once a tick, not once a request: a full spool must not flood the log too.
  let unlogged: { count: number; why: string } | undefined;
  function lose(count: number, why: string): void {
    lost += count;
    metrics.auditRecords('lost', count);
    if (unlogged) unlogged.count += count;
    else unlogged = { count, why };
  }
  function logLosses(): void {
    if (!unlogged) return;
    logger.error(
      { audit: { lost: unlogged.count, lostSoFar: lost } },
      `audit records lost: ${unlogged.why}`,
    );
    unlogged = undefined;
  }

  /**
   * Writes the records spooled until now, in batches; one run at a time. Records that come
   * while it runs wait for a full batch or the next tick: chasing them would write a train of
   * small batches after each full one, each a transaction of its own through knex, which the
   * gateway pays for per batch (bench/results.md, "The audit log's cost").
   */
  function writeSpooled(count = size()): Promise<void> {
    if (writing) return writing;
    if (count === 0) return Promise.resolve();
    const run = writeBatches(count).finally(() => (writing = undefined));
    writing = run;
    // Full batches that came meanwhile are written at once (not after a failure: the tick
    // retries).
    run.then(
      () => {
        const full = size() - (size() % batchMax);
        if (full > 0) void writeSpooled(full).catch(() => undefined);
      },
      () => undefined,
    );
    return run;
  }

  /** Writes the first `count` records of the spool. */
  async function writeBatches(count: number): Promise<void> {
    for (let left = count; left > 0;) {
      const length = unclear?.records ?? Math.min(isolating?.size ?? batchMax, left);
      const batch = spool.slice(first, first + length);
      let attempted: BatchMark | undefined;
      let appended: number;
      try {
        appended = await appender.append(batch, unclear, (mark) => (attempted = mark));
      } catch (err) {
        const code =
          refusedForGood(err) ?? (err instanceof UnwritableRecordError ? err.code : undefined);
        if (code !== undefined) {
          // Refused before it committed (a statement's error rolls the batch back, and one that
          // had committed is found by the mark first): nothing of it is there.
          unclear = undefined;
          answered();
          left -= isolate(batch, code);
          continue;
        }
        // Unknown whether it committed: the retry looks for its last records first.
        unclear = attempted ?? unclear;
        if (failing === undefined) {
          logger.warn({ err, spooled: size() }, 'audit log: database unavailable; spooling');
        }
        failing = err;
        throw err;
      }
      unclear = undefined;
      answered();
      taken(batch.length);
      left -= batch.length;
      // Not those passed over: a Keycloak event another replica wrote is counted there.
      metrics.auditRecords('written', appended);
      if (isolating && settled >= isolating.until) isolating = undefined;
    }
  }

  /** The database answered: an outage, if there was one, is over. */
  function answered(): void {
    if (failing !== undefined) logger.info({ spooled: size() }, 'audit log: writing again');
    failing = undefined;
  }

  /**
   * A batch refused for good (by the database, or a record no row can be made of) for something
   * a record of it holds: halved until the record is alone, which is then lost (counted, logged
   * without its fields) and the writing goes on with full batches from the record after it. How
   * many records of the spool it took out (0 while halving, 1 for the record lost).
   */
  function isolate(batch: AuditEvent[], code: string): number {
    if (batch.length > 1) {
      isolating = {
        size: Math.ceil(batch.length / 2),
        until: Math.max(isolating?.until ?? 0, settled + batch.length),
      };
      return 0;
    }
    const [record] = batch;
    lose(1, 'refused for good');
    // Its code, what it was and when: none of its fields, which the database refused to hold.
    logger.error(
      { audit: { code, action: record!.action, atMs: record!.atMs, lostSoFar: lost } },
      'audit record refused for good; lost',
    );
    taken(1);
    // Found: what follows it is as likely to be written whole as any batch (another record
    // refused is halved to in turn), not a record a transaction to the end of its batch.
    isolating = undefined;
    return 1;
  }

  /** The first `count` records of the spool are settled: written, or lost for good. */
  function taken(count: number): void {
    first += count;
    settled += count;
    if (first > 1024 && first * 2 > spool.length) {
      spool = spool.slice(first);
      first = 0;
    }
  }

  function take(event: AuditEvent): boolean {
    if (closed || size() >= spoolMax) return false;
    spool.push(event);
    spooled++;
    if (size() === batchMax && !writing) void writeSpooled().catch(() => undefined);
    return true;
  }

  return {
    record(event) {
      if (take(event)) return true;
      lose(1, closed ? 'recorded after shutdown' : 'the spool is full');
      return false;
    },
    offer: take,
    async flush() {
      // Up to the records spooled now, not those that come while it writes: under steady load
      // a run in progress is followed by one of the full batches that came meanwhile, and
      // waiting for the spool to be empty (settle() of provisioning, a shutdown) would not end.
      const mark = spooled;
      while (settled < mark) {
        // A run in progress first (it may hold the mark's last records); a failed one is
        // retried by the run of our own, whose failure is ours to tell.
        if (writing) await writing.catch(() => undefined);
        else await writeSpooled(mark - settled);
      }
    },
    readiness() {
      const details = { spooled: size(), lost };
      const status = failing !== undefined || lost > 0 ? 'degraded' : 'up';
      return Promise.resolve({ status, details });
    },
    async close(graceMs) {
      // Not awaited: a write in progress is what flush waits for, within the grace.
      void ticks.stop();
      // A failed write (a connection reset, a failover) is tried again while the grace lasts:
      // giving up at the first would lose the whole spool with time left to write it.
      const written = (async () => {
        while (!closed) {
          try {
            return await this.flush();
          } catch {
            await sleep(CLOSE_RETRY_PAUSE_MS, undefined, { ref: false });
          }
        }
      })();
      try {
        await within(written, graceMs, () => undefined);
      } finally {
        closed = true;
      }
      if (size() > 0) lose(size(), 'the database was unavailable at shutdown');
      logLosses();
    },
  };
}
