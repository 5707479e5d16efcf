import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { toIsoTimestamp } from '../db/column-values.ts';
import { runSpared, sparedWorkMsOf } from '../db/database.ts';
import { AppError } from '../envelope/errors.ts';
import type { Clock } from '../time/clock.ts';
import { every } from '../time/every.ts';
import { exportSpan, firstSeqOf } from './audit-log.repo.ts';
import { AUDIT_TABLE } from './audit-rows.ts';
import type { DownloadJob, DownloadState } from './download-jobs.schemas.ts';
import { createLongReads, type LongReads } from './long-reads.ts';

export const JOBS = 'audit_download_jobs';

/** How long a job and its download are kept: the reference platform's default, a week. */
export const DOWNLOAD_RETENTION_MS = 7 * 86_400_000;
/** Jobs an organization may keep at once (the reference's default limit). */
export const DOWNLOAD_JOBS_MAX = 100;
/**
 * The statements of a run's spared transaction (begin, its limit, the log's end, the
 * organization's first record, the span's ends, its last checkpoint, the count, commit), each
 * of which may take DATABASE_SPARED_TIMEOUT_MS.
 */
const RUN_STATEMENTS = 8;
/** Without limits (PGlite, a pool opened without): an `Executing` job this old is lost. */
const STALE_RUN_MS = 10 * 60_000;
/** The replicas' clocks may differ this much: a run is not taken as lost by a clock ahead. */
const CLOCK_SKEW_MS = 60_000;

/**
 * How old an `Executing` job is when its replica must have gone away: older than its run may
 * take (every statement of it as long as the spared limit lets it, the wait for a connection
 * and the final update's). Any less, and another replica's sweep fails a run still going.
 */
export function staleRunMsOf(db: Knex): number {
  const run = sparedWorkMsOf(db, RUN_STATEMENTS + 1);
  return run === undefined ? STALE_RUN_MS : run + CLOCK_SKEW_MS;
}

/** A job's range as read: epoch milliseconds, both ends included to the second. */
export interface DownloadRange {
  /** The body as sent, shown back in the list. */
  conditions: { ts_from: string; ts_to: string };
  fromMs: number;
  toMs: number;
}

/** What a finished job covers: the range's records of the log up to `lastSeq`. */
export interface FinishedJob {
  org: string;
  fromIso: string;
  /** Exclusive: the second after `ts_to`. */
  toIso: string;
  /** The first record it covers; null for a job run by a release that noted none. */
  firstSeq: number | null;
  lastSeq: number;
  conditions: { ts_from: string; ts_to: string };
}

/**
 * Whose jobs: an organization's readers' (`whole: false`), which hold its own records only and
 * go when an organization is created again under its id; or platform administrators'
 * (`whole: true`), of the whole log kept under the id (a deleted organization's records
 * included), which stay. Each is listed, counted and downloaded apart from the other.
 */
export interface JobsOf {
  org: string;
  whole: boolean;
}

export interface DownloadJobs {
  /** A new job of `of`; refused while it keeps as many as it may. */
  create(of: JobsOf, range: DownloadRange, creator: { id: string; name: string }): Promise<string>;
  /**
   * The jobs of `of`, newest first (one, with `id`), its runs whose replica went away failed
   * first: with the audit log off no poll sweeps, and a reader waits on the list.
   */
  list(of: JobsOf, id?: string): Promise<DownloadJob[]>;
  /** What a job's download holds; 404 for no such job of `of`, 409 until it has data. */
  finished(of: JobsOf, id: string): Promise<FinishedJob>;
  /** Runs jobs waiting to run until none is left; each is claimed by one replica only. */
  runWaiting(): Promise<void>;
  /** Deletes expired jobs; fails runs whose replica went away. */
  sweep(): Promise<void>;
}

interface JobRow {
  id: string;
  org: string;
  status: DownloadState;
  conditions: unknown;
  range_from: unknown;
  range_to: unknown;
  first_seq: unknown;
  last_seq: unknown;
  count_export: number | null;
  message: string | null;
  created_by_id: string | null;
  created_by_name: string | null;
  created_at: unknown;
  updated_at: unknown;
  whole_log: boolean;
}

/** The range as sent, in the order sent (jsonb keeps its keys in an order of its own). */
function conditionsOf(row: JobRow): { ts_from: string; ts_to: string } {
  const kept = (
    typeof row.conditions === 'string' ? JSON.parse(row.conditions) : row.conditions
  ) as {
    ts_from: string;
    ts_to: string;
  };
  return { ts_from: kept.ts_from, ts_to: kept.ts_to };
}

function jobOf(row: JobRow): DownloadJob {
  return {
    download_id: row.id,
    status: row.status,
    conditions: JSON.stringify(conditionsOf(row)),
    count_export: row.count_export,
    message: row.message,
    create_timestamp: toIsoTimestamp(row.created_at),
    create_user_id: row.created_by_id,
    create_user_name: row.created_by_name,
    last_update_timestamp: toIsoTimestamp(row.updated_at),
  };
}

/** A job's range as ISO 8601, `to` exclusive. */
const rangeIsoOf = (row: JobRow) => ({
  from: toIsoTimestamp(row.range_from),
  to: toIsoTimestamp(row.range_to),
});

/**
 * The download jobs kept in PostgreSQL, shared by every replica; each run among this process's
 * `longReads` (none bound without). Once `stopping` aborts (shutdown), a run's read in progress
 * is cancelled and the run failed: it only reads, and must not hold the database's close.
 */
export function createDownloadJobs(
  db: Knex,
  clock: Clock,
  logger: Logger,
  longReads: LongReads = createLongReads(Infinity),
  stopping?: AbortSignal,
): DownloadJobs {
  const now = () => new Date(clock.now());
  const staleRunMs = staleRunMsOf(db);

  /**
   * Claims a waiting job: `skip locked`, so two replicas never claim the same. Jobs run one at a
   * time per replica, so the oldest job first would let one organization's 100 jobs (or its
   * administrators') hold back every job started after them: instead the oldest job of whoever
   * was served longest ago (never, first) runs next, so the queues take turns.
   */
  /** Fails the runs (of `scope`) whose replica went away: `Executing` past any run's length. */
  async function failStale(scope: { org?: string; whole_log?: boolean }): Promise<void> {
    const at = now();
    await db(JOBS)
      .where({ ...scope, status: 'Executing' })
      .where('updated_at', '<', new Date(at.getTime() - staleRunMs))
      .update({
        status: 'Failed',
        message: 'The run was interrupted; start a new download.',
        updated_at: at,
      });
  }

  async function claim(): Promise<JobRow | undefined> {
    const claimed = await db.raw<{ rows: JobRow[] }>(
      `update ${JOBS} set status = 'Executing', updated_at = ?
       where id = (select id from ${JOBS} waiting where status = 'NotExecuted'
                   order by (select max(served.updated_at) from ${JOBS} served
                             where served.org = waiting.org
                               and served.whole_log = waiting.whole_log
                               and served.status <> 'NotExecuted') nulls first,
                            created_at
                   limit 1 for update skip locked)
       returning *`,
      [now()],
    );
    return claimed.rows[0];
  }

  /** Fixes what the job covers (the log as it is now) and counts it. */
  async function run(job: JobRow): Promise<void> {
    try {
      // Counts a span of any length: not under the statement timeout.
      const { firstSeq, lastSeq, count } = await runSpared(
        db,
        async (trx) => {
          const end = await trx(AUDIT_TABLE).where({ org: job.org }).max<{ max: unknown }[]>({
            max: 'seq',
          });
          const lastSeq = Number(end[0]?.max ?? 0);
          // What its download holds: the range's stretch of the log (audit-log.repo.ts), of
          // the organization's own records for its readers' job, of the whole for others.
          const since = job.whole_log ? 1 : await firstSeqOf(trx, job.org);
          const span = await exportSpan(trx, job.org, { ...rangeIsoOf(job), since }, lastSeq);
          const counted = await trx(AUDIT_TABLE)
            .where({ org: job.org })
            .where('seq', '>=', span.first)
            .where('seq', '<=', span.last)
            .count<{ count: string | number }[]>({ count: '*' });
          return { firstSeq: span.first, lastSeq, count: Number(counted[0]?.count ?? 0) };
        },
        { isolationLevel: 'repeatable read', readOnly: true },
        stopping,
      );
      await db(JOBS)
        .where({ id: job.id, status: 'Executing' })
        .update({
          status: count > 0 ? 'Completion' : 'NoData',
          count_export: count,
          first_seq: firstSeq,
          last_seq: lastSeq,
          updated_at: now(),
        });
    } catch (err) {
      logger.error({ err, job: job.id }, 'audit download job failed');
      await db(JOBS)
        .where({ id: job.id })
        .update({ status: 'Failed', message: 'Reading the audit log failed.', updated_at: now() });
    }
  }

  return {
    async create({ org, whole }, range, creator) {
      const id = randomUUID();
      const created = now();
      await db.transaction(async (trx) => {
        // Serialises the organization's creations, so two at once cannot both pass the limit.
        await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`${JOBS}:${org}`]);
        const kept = await trx(JOBS)
          .where({ org, whole_log: whole })
          .count<{ count: string | number }[]>({
            count: '*',
          });
        if (Number(kept[0]?.count ?? 0) >= DOWNLOAD_JOBS_MAX) {
          throw new AppError('auditDownloadLimit');
        }
        await trx(JOBS).insert({
          id,
          org,
          whole_log: whole,
          status: 'NotExecuted',
          conditions: JSON.stringify(range.conditions),
          range_from: new Date(range.fromMs),
          // Both ends included to the second, as the reference reads `BETWEEN`.
          range_to: new Date(range.toMs + 1000),
          created_by_id: creator.id,
          created_by_name: creator.name,
          created_at: created,
          updated_at: created,
          expires_at: new Date(created.getTime() + DOWNLOAD_RETENTION_MS),
        });
      });
      return id;
    },
    async list({ org, whole }, id) {
      await failStale({ org, whole_log: whole });
      const query = db(JOBS)
        .where({ org, whole_log: whole })
        .orderBy('created_at', 'desc')
        .orderBy('id');
      if (id !== undefined) void query.where({ id });
      return ((await query) as JobRow[]).map(jobOf);
    },
    async finished({ org, whole }, id) {
      const row = (await db(JOBS).where({ org, id, whole_log: whole }).first()) as
        JobRow | undefined;
      if (row === undefined) throw new AppError('auditDownloadNotFound');
      if (row.status !== 'Completion') throw new AppError('auditDownloadNotReady');
      const { from, to } = rangeIsoOf(row);
      return {
        org,
        fromIso: from,
        toIso: to,
        firstSeq: row.first_seq === null ? null : Number(row.first_seq),
        lastSeq: Number(row.last_seq),
        conditions: conditionsOf(row),
      };
    },
    async runWaiting() {
      for (;;) {
        // Its turn among the exports and downloads: a job waits, `NotExecuted`, never refused.
        const slot = await longReads.wait();
        try {
          const job = await claim();
          if (job === undefined) return;
          await run(job);
        } finally {
          slot.release();
        }
      }
    },
    async sweep() {
      await db(JOBS).where('expires_at', '<=', now()).del();
      await failStale({});
    },
  };
}

/**
 * A replica's runner: a job is run at once by the replica that took it (`kick`, which first
 * sweeps: expired jobs go, a run whose replica went away is failed), and, with `pollMs`, a job
 * whose replica went before running it by whichever replica looks next. Without `pollMs` (the
 * audit log off) nothing runs in the background: jobs are still run and swept when one is
 * started.
 */
export function runDownloadJobs(
  jobs: DownloadJobs,
  options: { pollMs: number | undefined; logger: Logger },
): { kick(): void; close(): Promise<void> } {
  const { logger } = options;
  let running: Promise<void> | undefined;
  let again = false;
  const runOnce = async () => {
    await jobs.sweep().catch((err: unknown) => logger.warn({ err }, 'audit download sweep failed'));
    await jobs.runWaiting();
  };
  const kick = () => {
    if (running) {
      again = true;
      return;
    }
    running = runOnce()
      .catch((err: unknown) => logger.warn({ err }, 'audit download jobs not run'))
      .finally(() => {
        running = undefined;
        if (again) {
          again = false;
          kick();
        }
      });
  };
  // kick reports its own failures.
  const poll =
    options.pollMs === undefined
      ? undefined
      : every(
          options.pollMs,
          () => {
            kick();
            return running ?? Promise.resolve();
          },
          { onError: () => undefined },
        );
  return { kick, close: async () => poll?.stop() };
}
