import { systemClock, type Clock } from '../time/clock.ts';

/**
 * A synchronous map with per-entry expiry and a size bound that evicts the least recently used
 * entry. Expiry is checked on read rather than with timers, so it never keeps a process alive.
 * Used directly on hot paths (verified tokens) and behind the async in-process Cache.
 */
export class TtlLru<V> {
  // A Map iterates in insertion order, so re-inserting on access keeps the LRU entry first.
  private readonly entries = new Map<string, { value: V; expiresAt: number }>();
  private readonly maxEntries: number;
  private readonly clock: Clock;

  constructor(maxEntries: number, clock: Clock = systemClock) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) {
      throw new RangeError(`maxEntries must be a positive integer, got ${maxEntries}`);
    }
    this.maxEntries = maxEntries;
    this.clock = clock;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The live value under `key`, refreshing its recency; undefined when absent or expired. */
  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    this.entries.delete(key);
    if (entry.expiresAt <= this.clock.now()) return undefined;
    this.entries.set(key, entry);
    return entry.value;
  }

  /** Stores `value` until `expiresAt` (epoch ms), evicting the least recently used beyond the bound. */
  set(key: string, value: V, expiresAt: number): void {
    this.entries.delete(key);
    this.entries.set(key, { value, expiresAt });
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

  delete(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }
}
