import { assertValidTtl, type Cache } from './cache.ts';
import { TtlLru } from './ttl-lru.ts';

export interface MemoryCacheOptions {
  /** Upper bound on stored entries; the least recently used entry is evicted beyond it. */
  maxEntries: number;
  /** Clock in epoch milliseconds; defaults to `Date.now`. */
  now?: () => number;
}

/** Creates an in-process cache for single-instance deployments (and the Redis fallback). */
export function createMemoryCache({ maxEntries, now = Date.now }: MemoryCacheOptions): Cache {
  const entries = new TtlLru<string>(maxEntries, now);
  return {
    kind: 'memory',
    get(key) {
      return Promise.resolve(entries.get(key));
    },
    set(key, value, ttlMs) {
      // The executor turns a bad TTL into a rejection, as the Redis backend reports it.
      return new Promise((resolve) => {
        assertValidTtl(ttlMs);
        entries.set(key, value, now() + ttlMs);
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
