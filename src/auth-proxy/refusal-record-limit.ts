import type { Clock } from '../time/clock.ts';

/**
 * How often a refusal of one reason is written to the log and the audit log. Anyone who reaches
 * the admin listener can post garbage: one record per post would let a flood fill the audit
 * table (and the log) with rows that say nothing new. The metric still counts every one.
 */
export const REFUSAL_RECORD_INTERVAL_MS = 60_000;

/** Keys tracked at most: past it, the oldest window ends early (its run is told). */
const MAX_KEYS = 10_000;

/** Refusals of one key that were counted, not recorded, in one window. */
export interface UnrecordedRun {
  key: string;
  count: number;
  /** When the first and the last of them came (epoch ms). */
  firstMs: number;
  lastMs: number;
}

export interface RefusalRecordLimit {
  /**
   * One refusal of `key`: whether it is recorded, and the runs this ended (its key's previous
   * window, a window pushed out by the cap on keys), each to be told once, before it.
   */
  take(key: string): { recorded: boolean; ended: UnrecordedRun[] };
  /** The runs of the windows over by now, taken out (a window without one is forgotten). */
  ended(): UnrecordedRun[];
  /**
   * Every run, its window over or not (at shutdown), taken out; with `of`, those of the keys it
   * holds for only (the windows of the others go on).
   */
  drain(of?: (key: string) => boolean): UnrecordedRun[];
}

interface Window {
  startMs: number;
  recorded: number;
  run: UnrecordedRun | undefined;
}

/**
 * Decides, per key (a reason; an address, a log and a reason...), whether a refusal is
 * recorded: the first `recordedPerWindow` of a window of `intervalMs` that the key's first
 * refusal opens, then none until the window is over; those are counted in a run, which the
 * caller records as one (when the key's next window opens, or `ended`). At most `maxKeys` keys
 * are kept: a flood of new keys ends the oldest windows early, it never grows the memory.
 */
export function createRefusalRecordLimit(
  clock: Clock,
  options: { intervalMs?: number; recordedPerWindow?: number; maxKeys?: number } = {},
): RefusalRecordLimit {
  const intervalMs = options.intervalMs ?? REFUSAL_RECORD_INTERVAL_MS;
  const recordedPerWindow = options.recordedPerWindow ?? 1;
  const maxKeys = options.maxKeys ?? MAX_KEYS;
  // In the order the windows opened (a key whose window opens again goes last): the oldest,
  // the first to end, are first.
  const windows = new Map<string, Window>();

  function open(key: string, now: number, ended: UnrecordedRun[]): void {
    windows.delete(key);
    if (windows.size >= maxKeys) {
      const [oldest, window] = windows.entries().next().value!;
      windows.delete(oldest);
      if (window.run) ended.push(window.run);
    }
    windows.set(key, { startMs: now, recorded: 1, run: undefined });
  }

  return {
    take(key) {
      const now = clock.now();
      const ended: UnrecordedRun[] = [];
      const window = windows.get(key);
      if (window === undefined || now - window.startMs >= intervalMs) {
        if (window?.run) ended.push(window.run);
        open(key, now, ended);
        return { recorded: true, ended };
      }
      if (window.recorded < recordedPerWindow) {
        window.recorded += 1;
        return { recorded: true, ended };
      }
      if (window.run) {
        window.run.count += 1;
        window.run.lastMs = now;
      } else {
        window.run = { key, count: 1, firstMs: now, lastMs: now };
      }
      return { recorded: false, ended };
    },
    ended() {
      const now = clock.now();
      const runs: UnrecordedRun[] = [];
      for (const [key, window] of windows) {
        if (now - window.startMs < intervalMs) break;
        windows.delete(key);
        if (window.run) runs.push(window.run);
      }
      return runs;
    },
    drain(of) {
      const runs: UnrecordedRun[] = [];
      for (const [key, window] of windows) {
        if (of !== undefined && !of(key)) continue;
        windows.delete(key);
        if (window.run) runs.push(window.run);
      }
      return runs;
    },
  };
}
