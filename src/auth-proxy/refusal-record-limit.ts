import type { Clock } from '../time/clock.ts';

/**
 * How often a refusal of one reason is written to the log and the audit log. Anyone who reaches
 * the admin listener can post garbage: one record per post would let a flood fill the audit
 * table (and the log) with rows that say nothing new. The metric still counts every one.
 */
export const REFUSAL_RECORD_INTERVAL_MS = 60_000;

/**
 * Decides, per reason, whether a refusal is recorded: the first of a reason, then at most one
 * per `intervalMs`. What it answers for a recorded one is how many of that reason went
 * unrecorded since the previous record (0: none), so the record says the rest.
 */
export function createRefusalRecordLimit(clock: Clock, intervalMs = REFUSAL_RECORD_INTERVAL_MS) {
  const last = new Map<string, { at: number; unrecorded: number }>();
  /** The number unrecorded since the last record when this one is recorded; else undefined. */
  return (reason: string): number | undefined => {
    const now = clock.now();
    const seen = last.get(reason);
    if (seen !== undefined && now - seen.at < intervalMs) {
      seen.unrecorded += 1;
      return undefined;
    }
    // The reasons are a closed list: the map stays as small as it.
    last.set(reason, { at: now, unrecorded: 0 });
    return seen?.unrecorded ?? 0;
  };
}
