import { assertValidTtl, type Counter, type LocalCache } from './cache.ts';
import { TtlLru } from './ttl-lru.ts';
import { systemClock, type Clock } from '../time/clock.ts';

export interface MemoryCacheOptions {
  /** Upper bound on stored entries; the least recently used entry is evicted beyond it. */
  maxEntries: number;
  clock?: Clock;
}

/** Creates an in-process cache for single-instance deployments (and the Redis fallback). */
export function createMemoryCache({
  maxEntries,
  clock = systemClock,
}: MemoryCacheOptions): LocalCache {
  const now = () => clock.now();
  const entries = new TtlLru<string>(maxEntries, clock);
  const counters = new TtlLru<{ count: number; expiresAt: number }>(maxEntries, clock);
  let claimsHeldUntil = 0;
  const counterOf = (key: string): Counter | undefined => {
    const entry = counters.get(key);
    return entry && { count: entry.count, ttlMs: entry.expiresAt - now() };
  };
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
      counters.delete(key);
      return Promise.resolve();
    },
    increment(key, windowMs, by = 1) {
      return new Promise((resolve) => {
        assertValidTtl(windowMs);
        const entry = counters.get(key) ?? { count: 0, expiresAt: now() + windowMs };
        counters.set(key, { count: entry.count + by, expiresAt: entry.expiresAt }, entry.expiresAt);
        resolve(counterOf(key)!);
      });
    },
    claim(key, ttlMs) {
      // A counter's first increment, as in Redis: among the counters, where proofs' one-time
      // use was kept before, so a busy DPoP client evicts no cached login.
      return new Promise((resolve) => {
        assertValidTtl(ttlMs);
        if (counters.get(key) !== undefined) return resolve(false);
        const expiresAt = now() + ttlMs;
        counters.set(key, { count: 1, expiresAt }, expiresAt);
        claimsHeldUntil = Math.max(claimsHeldUntil, expiresAt);
        resolve(true);
      });
    },
    counter(key) {
      return Promise.resolve(counterOf(key));
    },
    claimsHeldUntil: () => claimsHeldUntil,
    ping() {
      return Promise.resolve();
    },
    close() {
      entries.clear();
      counters.clear();
      return Promise.resolve();
    },
  };
}
