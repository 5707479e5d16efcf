import { assertValidTtl, type Cache } from './cache.ts';

export interface MemoryCacheOptions {
  /** Upper bound on stored entries; the least recently used entry is evicted beyond it. */
  maxEntries: number;
  /** Clock in epoch milliseconds; defaults to `Date.now`. */
  now?: () => number;
}

interface Entry {
  value: string;
  expiresAt: number;
}

/**
 * Creates an in-process cache for single-instance deployments. Expiry is checked lazily on
 * read rather than with timers, so an idle cache never keeps the process alive.
 */
export function createMemoryCache({ maxEntries, now = Date.now }: MemoryCacheOptions): Cache {
  if (!Number.isInteger(maxEntries) || maxEntries < 1) {
    throw new RangeError(`maxEntries must be a positive integer, got ${maxEntries}`);
  }
  // A Map iterates in insertion order, so re-inserting on access keeps the LRU entry first.
  const entries = new Map<string, Entry>();

  function evictOverflow(): void {
    for (const key of entries.keys()) {
      if (entries.size <= maxEntries) return;
      entries.delete(key);
    }
  }

  return {
    kind: 'memory',
    get(key) {
      const entry = entries.get(key);
      if (!entry) return Promise.resolve(undefined);
      entries.delete(key);
      if (entry.expiresAt <= now()) return Promise.resolve(undefined);
      entries.set(key, entry);
      return Promise.resolve(entry.value);
    },
    set(key, value, ttlMs) {
      // The executor turns a bad TTL into a rejection, as the Redis backend reports it.
      return new Promise((resolve) => {
        assertValidTtl(ttlMs);
        entries.delete(key);
        entries.set(key, { value, expiresAt: now() + ttlMs });
        evictOverflow();
        resolve();
      });
    },
    delete(key) {
      entries.delete(key);
      return Promise.resolve();
    },
    ping() {
      return Promise.resolve();
    },
    close() {
      entries.clear();
      return Promise.resolve();
    },
  };
}
