import { systemClock, type Clock } from '../time/clock.ts';

interface Entry<V> {
  value: V;
  expiresAt: number;
  /** When it was last put at the newest end: the count of placements at that moment. */
  placed: number;
}

/**
 * A synchronous map with per-entry expiry and a size bound that evicts the least recently used
 * entry. Expiry is checked on read rather than with timers, so it never keeps a process alive.
 * Used directly on hot paths (verified tokens) and behind the async in-process Cache.
 */
export class TtlLru<V> {
  // A Map iterates in insertion order, so re-inserting on access keeps the LRU entry first.
  private readonly entries = new Map<string, Entry<V>>();
  private readonly maxEntries: number;
  private readonly clock: Clock;
  /**
   * A read moves its entry to the newest end only once a quarter of the bound has been placed
   * after it: moving costs a delete and an insert, and a hot entry read on every request would
   * pay them each time. An entry read is so always among the newest quarter, and outlives at
   * least three quarters of the bound of new entries; below 4 entries every read moves.
   */
  private readonly moveAfter: number;
  private placements = 0;

  constructor(maxEntries: number, clock: Clock = systemClock) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) {
      throw new RangeError(`maxEntries must be a positive integer, got ${maxEntries}`);
    }
    this.maxEntries = maxEntries;
    this.clock = clock;
    this.moveAfter = Math.floor(maxEntries / 4);
  }

  get size(): number {
    return this.entries.size;
  }

  /** The live value under `key`, refreshing its recency; undefined when absent or expired. */
  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    if (entry.expiresAt <= this.clock.now()) {
      this.entries.delete(key);
      return undefined;
    }
    if (this.placements - entry.placed > this.moveAfter) {
      this.entries.delete(key);
      this.place(key, entry);
    }
    return entry.value;
  }

  /** Stores `value` until `expiresAt` (epoch ms), evicting the least recently used beyond the bound. */
  set(key: string, value: V, expiresAt: number): void {
    this.entries.delete(key);
    this.place(key, { value, expiresAt, placed: 0 });
    for (const oldest of this.entries.keys()) {
      if (this.entries.size <= this.maxEntries) break;
      this.entries.delete(oldest);
    }
  }

  /** Every live value whose key starts with `prefix` (expired ones are dropped on the way). */
  values(prefix: string): V[] {
    const now = this.clock.now();
    const values: V[] = [];
    for (const [key, entry] of this.entries) {
      if (entry.expiresAt <= now) this.entries.delete(key);
      else if (key.startsWith(prefix)) values.push(entry.value);
    }
    return values;
  }

  private place(key: string, entry: Entry<V>): void {
    entry.placed = ++this.placements;
    this.entries.set(key, entry);
  }

  delete(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }
}
