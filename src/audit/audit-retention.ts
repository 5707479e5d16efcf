import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { isDatabaseUnavailable } from '../db/database-failures.ts';
import { runSpared } from '../db/database.ts';
import type { Clock } from '../time/clock.ts';
import { every, type Periodic } from '../time/every.ts';
import { CHECKPOINTS_TABLE } from './audit-checkpointer.ts';
import { INCARNATIONS } from './audit-log.repo.ts';
import { AUDIT_TABLE, HEADS_TABLE } from './audit-rows.ts';

const DAY_MS = 24 * 3600 * 1000;

export const RETENTION_TABLE = 'audit_retention';

/** The platform's rule: the days of a log that chose none, and the bounds of a choice. */
export interface RetentionBounds {
  defaultDays: number;
  minDays: number;
  maxDays: number;
}

/** The days a log keeps: its own choice within the bounds as they are now, else the default. */
export function daysKept(own: number | undefined, bounds: RetentionBounds): number {
  if (own === undefined) return bounds.defaultDays;
  return Math.min(bounds.maxDays, Math.max(bounds.minDays, own));
}

/** Each organization's own number of days, as its administrator set it. */
export interface RetentionChoices {
  /** The days `org` chose; undefined: the platform's default. */
  of(org: string): Promise<number | undefined>;
  set(org: string, days: number): Promise<void>;
  all(): Promise<Map<string, number>>;
}

export function createRetentionChoices(db: Knex): RetentionChoices {
  return {
    async of(org) {
      const row = await db(RETENTION_TABLE)
        .where({ org })
        .first<{ days: number } | undefined>('days');
      return row?.days;
    },
    async set(org, days) {
      await db(RETENTION_TABLE).insert({ org, days }).onConflict('org').merge();
    },
    async all() {
      const rows: { org: string; days: number }[] = await db(RETENTION_TABLE).select('org', 'days');
      return new Map(rows.map(({ org, days }) => [org, days]));
    },
  };
}

/**
 * A stretch of a log kept for one number of days: its records from `from` (a seq) to the next
 * stretch's. A log whose id named several organizations one after the other (an id used again,
 * audit-incarnations.ts) has a stretch per organization, kept for the days that organization
 * chose (`days`, undefined: the platform's default): the new organization's administrator
 * chooses for its own records, never for the deleted organization's.
 */
interface Stretch {
  from: number;
  days: number | undefined;
}

/**
 * Each log's stretches, oldest first: the days an organization before chose are in the
 * incarnation row of the organization after it (`prior_days`), the last one's in RETENTION_TABLE.
 */
async function stretchesOf(db: Knex, own: Map<string, number>): Promise<Map<string, Stretch[]>> {
  const rows = (await db(INCARNATIONS)
    .select('org', 'first_seq', 'prior_days')
    .orderBy(['org', 'first_seq'])) as {
    org: string;
    first_seq: string | number;
    prior_days: number | null;
  }[];
  const stretches = new Map<string, Stretch[]>();
  for (const row of rows) {
    const log = stretches.get(row.org) ?? [{ from: 1, days: undefined }];
    log.at(-1)!.days = row.prior_days ?? undefined;
    log.push({ from: Number(row.first_seq), days: own.get(row.org) });
    stretches.set(row.org, log);
  }
  return stretches;
}

/**
 * The last record of the prefix of `org`'s log whose records are all past their stretch's
 * limit (0: none). A record within its days ends the prefix, whatever the records after it:
 * one with an older time than those before it (a Keycloak event taken late, one of a replica
 * whose clock was behind) waits for them, and so does a later stretch kept for fewer days.
 */
async function pastPrefixOf(
  db: Knex,
  org: string,
  stretches: Stretch[],
  bounds: RetentionBounds,
  now: number,
  signal: AbortSignal,
): Promise<number> {
  for (const [i, stretch] of stretches.entries()) {
    if (signal.aborted) return 0;
    const until = stretches[i + 1]?.from;
    const cutoff = new Date(now - daysKept(stretch.days, bounds) * DAY_MS);
    const query = db(AUDIT_TABLE)
      .where({ org })
      .where('seq', '>=', stretch.from)
      .where('at', '>=', cutoff);
    if (until !== undefined) void query.where('seq', '<', until);
    const [kept] = await query.min<{ first: unknown }[]>({ first: 'seq' });
    if (kept?.first !== null && kept?.first !== undefined) return Number(kept.first) - 1;
  }
  return Number.MAX_SAFE_INTEGER;
}

/**
 * Records one statement removes at most. A long expired prefix (a log's first pruning after a
 * year, or its days lowered from 365 to 90) removed in one statement could outlast the spared
 * timeout and be rolled back at every run, for ever; in statements of this many, each is short,
 * and each step done stays done.
 */
export const PRUNE_CHUNK_RECORDS = 10_000;

/**
 * Removes, in each log, the records older than their days (`daysKept`; per stretch, above):
 * always a prefix of the log whose records are all past their limit, ending at a checkpoint
 * (every record up to the newest checkpoint before the first record still within its days).
 * That checkpoint stays, and the checkpoints before it go: it vouches for the `prevHash` of
 * the first record left, so what remains verifies from there on, signed. A log without such a
 * checkpoint keeps its records until it has one (within AUDIT_CHECKPOINT_SECONDS). The prefix
 * goes in steps (pruneLog), each ending at a checkpoint as well. Returns how many records were
 * removed. Once `signal` aborts (shutdown), no step starts: the one in progress commits, and the
 * next run goes on from there; a search for a log's prefix in progress is cancelled. A log
 * whose pruning fails for a reason of its own (a row its deletes trip on) is told to `onFailure`
 * and left for the next run, the others pruned; a failure that says the database is unavailable
 * (isDatabaseUnavailable: down, a statement cancelled, the pool's wait given up) ends the run,
 * thrown, rather than being met again, and waited for, at every log after it. The records a
 * failed log's steps removed before its failure are counted.
 */
export async function pruneAuditLog(
  db: Knex,
  bounds: RetentionBounds,
  clock: Clock,
  options: {
    chunkRecords?: number;
    signal?: AbortSignal;
    /**
     * Told of each log whose pruning failed for a reason of its own; the run goes on with the
     * next log. A database unavailable is thrown instead.
     */
    onFailure?: (org: string, err: unknown) => void;
  } = {},
): Promise<number> {
  const chunk = options.chunkRecords ?? PRUNE_CHUNK_RECORDS;
  const signal = options.signal ?? new AbortController().signal;
  const own = await createRetentionChoices(db).all();
  const reused = await stretchesOf(db, own);
  const logs = await db(HEADS_TABLE).pluck<string[]>('org');
  const now = clock.now();
  let removed = 0;
  for (const org of logs) {
    if (signal.aborted) break;
    const stretches = reused.get(org) ?? [{ from: 1, days: own.get(org) }];
    // A large log's prefix takes long to find: not under the statement timeout, and cancelled
    // at shutdown (it only reads), which it would otherwise hold for minutes.
    // Each log on its own: one that fails for a reason of its own (a row its deletes trip on)
    // is told and tried again next run; the logs after it are still pruned. The database
    // unavailable ends the run: every log after it would fail the same way, each after a wait.
    try {
      const past = await runSpared(
        db,
        (trx) => pastPrefixOf(trx, org, stretches, bounds, now, signal),
        {},
        signal,
      );
      await pruneLog(db, org, past, chunk, signal, (count) => {
        removed += count;
      });
    } catch (err) {
      if (signal.aborted) break;
      if (isDatabaseUnavailable(err)) throw err;
      options.onFailure?.(org, err);
    }
  }
  return removed;
}

/** The newest checkpoint of `org` in (`after`, `upTo`]; undefined: none. */
async function newestCheckpoint(
  db: Knex,
  org: string,
  after: number,
  upTo: number,
): Promise<number | undefined> {
  const [row] = await db(CHECKPOINTS_TABLE)
    .where({ org })
    .where('seq', '>', after)
    .where('seq', '<=', upTo)
    .max<{ seq: unknown }[]>({ seq: 'seq' });
  return row?.seq === null || row?.seq === undefined ? undefined : Number(row.seq);
}

/**
 * Removes `org`'s records up to the newest checkpoint at or before `past` (see pruneAuditLog),
 * telling `removed` how many as each step commits (those of a step before a failure count). In
 * steps, each a transaction ending at a checkpoint (the newest within `chunk`
 * records, else the next one) and removing its records `chunk` at a time: a step that fails
 * leaves the steps before it done and the log verifiable from the checkpoint the last one
 * ended at; the next run goes on from there, as it does after a step `signal` stopped before it.
 * No removed record is read back.
 */
async function pruneLog(
  db: Knex,
  org: string,
  past: number,
  chunk: number,
  signal: AbortSignal,
  removed: (count: number) => void,
): Promise<void> {
  if (past < 1 || signal.aborted) return;
  const end = await newestCheckpoint(db, org, 0, past);
  if (end === undefined) return;
  const [oldest] = await db(AUDIT_TABLE)
    .where({ org })
    .where('seq', '<=', end)
    .min<{ seq: unknown }[]>({ seq: 'seq' });
  // Everything before `done` is gone (none left: the checkpoints before `end` are still to go).
  let done = oldest?.seq === null || oldest?.seq === undefined ? end : Number(oldest.seq) - 1;
  do {
    const target =
      (await newestCheckpoint(db, org, done, Math.min(end, done + chunk))) ??
      (await nextCheckpoint(db, org, done, end));
    const from = done;
    const gone = await runSpared(db, async (trx) => {
      let count = 0;
      for (let low = from; low < target; low += chunk) {
        count += deletedCount(
          await trx(AUDIT_TABLE)
            .where({ org })
            .where('seq', '>', low)
            .where('seq', '<=', Math.min(target, low + chunk))
            .del(),
        );
      }
      await trx(CHECKPOINTS_TABLE).where({ org }).where('seq', '<', target).del();
      return count;
    });
    removed(gone);
    done = target;
  } while (done < end && !signal.aborted);
}

/**
 * How many rows a DELETE removed: pg's knex says a number; knex-pglite's (the embedded database)
 * the result itself, its `rowCount` set.
 */
function deletedCount(deleted: unknown): number {
  if (typeof deleted === 'number') return deleted;
  return Number((deleted as { rowCount?: unknown } | undefined)?.rowCount ?? 0);
}

/** The oldest checkpoint of `org` in (`after`, `end`]: `end` itself is one. */
async function nextCheckpoint(db: Knex, org: string, after: number, end: number): Promise<number> {
  const [row] = await db(CHECKPOINTS_TABLE)
    .where({ org })
    .where('seq', '>', after)
    .where('seq', '<=', end)
    .min<{ seq: unknown }[]>({ seq: 'seq' });
  return row?.seq === null || row?.seq === undefined ? end : Number(row.seq);
}

/** Prunes every `intervalMs` (the first time a minute after start); any replica may, at once. */
export function scheduleRetention(deps: {
  db: Knex;
  bounds: RetentionBounds;
  clock: Clock;
  intervalMs: number;
  logger: Logger;
  /** The first prune's delay (a minute after start by default). */
  firstMs?: number;
  chunkRecords?: number;
}): Periodic {
  const prune = async (signal: AbortSignal) => {
    let failed = 0;
    const removed = await pruneAuditLog(deps.db, deps.bounds, deps.clock, {
      chunkRecords: deps.chunkRecords,
      signal,
      onFailure: (org, err) => {
        failed += 1;
        deps.logger.warn({ err, org }, "audit log: an organization's pruning failed; next time");
      },
    });
    if (removed > 0) deps.logger.info({ removed }, 'audit log: pruned');
    if (failed > 0) {
      deps.logger.warn({ failed }, 'audit log: pruning failed for some organizations; next time');
    }
  };
  return every(deps.intervalMs, prune, {
    firstMs: deps.firstMs ?? 60_000,
    onError: (err) => deps.logger.warn({ err }, 'audit log: pruning failed; next time'),
  });
}
