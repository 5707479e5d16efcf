import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Clock } from '../time/clock.ts';
import { AUDIT_TABLE } from './audit-rows.ts';

const DAY_MS = 24 * 3600 * 1000;

/**
 * Removes, in each log, the records older than `days`: always a prefix of the log (every record
 * up to the newest one past the limit, by sequence number, even if a replica's clock wrote a
 * later one a little earlier), so what remains is one unbroken chain that still verifies from
 * its first record on. Returns how many were removed.
 */
export async function pruneAuditLog(db: Knex, days: number, clock: Clock): Promise<number> {
  const cutoff = new Date(clock.now() - days * DAY_MS);
  const ends: { org: string; last: string | number }[] = await db(AUDIT_TABLE)
    .where('at', '<', cutoff)
    .groupBy('org')
    .select('org')
    .max({ last: 'seq' });
  let removed = 0;
  for (const { org, last } of ends) {
    const gone: unknown[] = await db(AUDIT_TABLE)
      .where({ org })
      .where('seq', '<=', Number(last))
      .del(['seq']);
    removed += gone.length;
  }
  return removed;
}

/** Prunes every `intervalMs` (the first time soon after start); any replica may, at once. */
export function scheduleRetention(deps: {
  db: Knex;
  days: number;
  clock: Clock;
  intervalMs: number;
  logger: Logger;
}): { close(): void } {
  const prune = () => {
    pruneAuditLog(deps.db, deps.days, deps.clock).then(
      (removed) => {
        if (removed > 0) deps.logger.info({ removed, days: deps.days }, 'audit log: pruned');
      },
      (err: unknown) => deps.logger.warn({ err }, 'audit log: pruning failed; next time'),
    );
  };
  const first = setTimeout(prune, 60_000);
  const timer = setInterval(prune, deps.intervalMs);
  first.unref();
  timer.unref();
  return {
    close() {
      clearTimeout(first);
      clearInterval(timer);
    },
  };
}
