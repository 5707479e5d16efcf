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
  const claims = createClaims(maxEntries);
  let claimsHeldUntil = 0;
  const counterOf = (key: string): Counter | undefined => {
    const entry = counters.get(key);
    if (entry) return { count: entry.count, ttlMs: entry.expiresAt - now() };
    // A claim reads as the counter of its first increment, as in Redis (fallback-cache.ts).
    const claimedUntil = claims.heldUntil(key, now());
    return claimedUntil === undefined ? undefined : { count: 1, ttlMs: claimedUntil - now() };
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
      claims.delete(key);
      return Promise.resolve();
    },
    increment(key, windowMs, by = 1) {
      return new Promise((resolve) => {
        assertValidTtl(windowMs);
        // A live claim is the counter's first increment, as in Redis (fallback-cache.ts).
        const claimedUntil = claims.heldUntil(key, now());
        const entry =
          counters.get(key) ??
          (claimedUntil === undefined
            ? { count: 0, expiresAt: now() + windowMs }
            : { count: 1, expiresAt: claimedUntil });
        counters.set(key, { count: entry.count + by, expiresAt: entry.expiresAt }, entry.expiresAt);
        resolve(counterOf(key)!);
      });
    },
    claim(key, ttlMs) {
      return new Promise((resolve) => {
        assertValidTtl(ttlMs);
        // A counted key is claimed already, as in Redis, where a claim is a first increment.
        if (counters.get(key) !== undefined) return resolve(false);
        const expiresAt = now() + ttlMs;
        const claimed = claims.take(key, now(), expiresAt);
        if (claimed) claimsHeldUntil = Math.max(claimsHeldUntil, expiresAt);
        resolve(claimed);
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
      claims.clear();
      return Promise.resolve();
    },
  };
}

/**
 * The claims (a DPoP proof's one-time use), apart from the least-recently-used entries: a live
 * claim is never pushed out, for a claim pushed out is a replay accepted. At the bound the
 * expired ones are dropped, oldest first, up to the first live one: claims of one lifetime (a
 * proof's: the window and its allowances, from its use) expire in the order they were made, so
 * each claim is walked over once, never the whole map per request. When the oldest is still
 * live, the new claim is refused: at most `maxEntries` claims per lifetime, a proof beyond them
 * refused rather than an earlier one forgotten.
 */
function createClaims(maxEntries: number) {
  const held = new Map<string, number>();
  return {
    heldUntil(key: string, now: number): number | undefined {
      const expiresAt = held.get(key);
      return expiresAt !== undefined && expiresAt > now ? expiresAt : undefined;
    },
    /** True when `key` was not held and is now, until `expiresAt`. */
    take(key: string, now: number, expiresAt: number): boolean {
      const before = held.get(key);
      if (before !== undefined && before > now) return false;
      held.delete(key);
      if (held.size >= maxEntries) {
        for (const [oldest, until] of held) {
          if (until > now) break;
          held.delete(oldest);
        }
        if (held.size >= maxEntries) return false;
      }
      held.set(key, expiresAt);
      return true;
    },
    delete: (key: string) => held.delete(key),
    clear: () => held.clear(),
  };
}
