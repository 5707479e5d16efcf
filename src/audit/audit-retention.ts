import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { runSpared } from '../db/database.ts';
import type { Clock } from '../time/clock.ts';
import { every, type Periodic } from '../time/every.ts';
import { CHECKPOINTS_TABLE } from './audit-checkpointer.ts';
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
 * Removes, in each log, the records older than its days (`daysKept`): always a prefix of the
 * log whose records are all past the limit, ending at a checkpoint (every record up to the
 * newest checkpoint before the first record still within its days; a record with an older time
 * than those before it, a Keycloak event taken late or one of a replica whose clock was behind,
 * waits for them). That checkpoint stays, and the checkpoints before it go: it vouches for the
 * `prevHash` of the first record left, so what remains verifies from there on, signed. A log
 * without such a checkpoint keeps its records until it has one (within
 * AUDIT_CHECKPOINT_SECONDS). Returns how many records were removed.
 */
export async function pruneAuditLog(
  db: Knex,
  bounds: RetentionBounds,
  clock: Clock,
): Promise<number> {
  const own = await createRetentionChoices(db).all();
  const logs = await db(HEADS_TABLE).pluck<string[]>('org');
  let removed = 0;
  for (const org of logs) {
    const cutoff = new Date(clock.now() - daysKept(own.get(org), bounds) * DAY_MS);
    // A large log's prefix takes long to find and remove: not under the statement timeout.
    removed += await runSpared(db, (trx) => pruneLog(trx, org, cutoff));
  }
  return removed;
}

/** Removes `org`'s records before `cutoff` up to a checkpoint (see pruneAuditLog); how many. */
async function pruneLog(trx: Knex.Transaction, org: string, cutoff: Date): Promise<number> {
  const [expired] = await trx(AUDIT_TABLE)
    .where({ org })
    .where('at', '<', cutoff)
    .max<{ last: unknown }[]>({ last: 'seq' });
  if (expired?.last === null || expired?.last === undefined) return 0;
  // A record within its days before that one (the newest past the limit may be an event
  // taken late with its own old time, a Keycloak event of a realm's first pull): the prefix
  // ends before it. Read from the log's start, it is found among what would go anyway.
  const [kept] = await trx(AUDIT_TABLE)
    .where({ org })
    .where('seq', '<', Number(expired.last))
    .where('at', '>=', cutoff)
    .min<{ first: unknown }[]>({ first: 'seq' });
  const past =
    kept?.first === null || kept?.first === undefined
      ? Number(expired.last)
      : Number(kept.first) - 1;
  const [anchor] = await trx(CHECKPOINTS_TABLE)
    .where({ org })
    .where('seq', '<=', past)
    .max<{ seq: unknown }[]>({ seq: 'seq' });
  if (anchor?.seq === null || anchor?.seq === undefined) return 0;
  const end = Number(anchor.seq);
  const gone: unknown[] = await trx(AUDIT_TABLE)
    .where({ org })
    .where('seq', '<=', end)
    .del(['seq']);
  await trx(CHECKPOINTS_TABLE).where({ org }).where('seq', '<', end).del();
  return gone.length;
}

/** Prunes every `intervalMs` (the first time a minute after start); any replica may, at once. */
export function scheduleRetention(deps: {
  db: Knex;
  bounds: RetentionBounds;
  clock: Clock;
  intervalMs: number;
  logger: Logger;
}): Periodic {
  const prune = async () => {
    const removed = await pruneAuditLog(deps.db, deps.bounds, deps.clock);
    if (removed > 0) deps.logger.info({ removed }, 'audit log: pruned');
  };
  return every(deps.intervalMs, prune, {
    firstMs: 60_000,
    onError: (err) => deps.logger.warn({ err }, 'audit log: pruning failed; next time'),
  });
}
