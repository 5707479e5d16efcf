import { assertValidTtl, ClaimRefused, type Counter, type LocalCache } from './cache.ts';
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
    claim(key, ttlMs, owner) {
      return new Promise((resolve) => {
        assertValidTtl(ttlMs);
        // A counted key is claimed already, as in Redis, where a claim is a first increment.
        if (counters.get(key) !== undefined) return resolve(false);
        const expiresAt = now() + ttlMs;
        // Throws ClaimRefused (a rejection) when there is no room for it.
        const claimed = claims.take(key, now(), expiresAt, owner);
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
 * claim is never pushed out, for a claim pushed out is a replay accepted. Expired claims are
 * dropped, oldest first, up to the first live one, before each new claim: claims of one
 * lifetime (a proof's: the window and its allowances, from its use) expire in the order they
 * were made, so each claim is walked over once, never the whole map per request. When
 * `maxEntries` claims are live, a new claim is refused (`full`): a proof beyond them refused
 * rather than an earlier one forgotten. So that one owner (a DPoP key flooding fresh proofs)
 * cannot take the whole bound and have everyone else's refused, once half the bound is held an
 * owner that holds a sixteenth of it or more gets no new claim (`owner_share`) until some of
 * its own expire: alone it holds at most half, and it takes sixteen owners to fill the store.
 */
function createClaims(maxEntries: number) {
  const held = new Map<string, { until: number; owner: string | undefined }>();
  /** How many claims each owner holds (dropped with its last). */
  const owned = new Map<string, number>();
  const pressure = maxEntries / 2;
  const share = Math.max(1, Math.floor(maxEntries / 16));

  function drop(key: string): void {
    const claim = held.get(key);
    if (claim === undefined) return;
    held.delete(key);
    if (claim.owner === undefined) return;
    const left = owned.get(claim.owner)! - 1;
    if (left === 0) owned.delete(claim.owner);
    else owned.set(claim.owner, left);
  }

  return {
    heldUntil(key: string, now: number): number | undefined {
      const expiresAt = held.get(key)?.until;
      return expiresAt !== undefined && expiresAt > now ? expiresAt : undefined;
    },
    /**
     * True when `key` was not held and is now, until `expiresAt`; false when it is held. Throws
     * ClaimRefused when it may not be taken now.
     */
    take(key: string, now: number, expiresAt: number, owner: string | undefined): boolean {
      const before = held.get(key);
      if (before !== undefined && before.until > now) return false;
      drop(key);
      for (const [oldest, claim] of held) {
        if (claim.until > now) break;
        drop(oldest);
      }
      if (held.size >= maxEntries) throw new ClaimRefused('full');
      if (owner !== undefined && held.size >= pressure && (owned.get(owner) ?? 0) >= share) {
        throw new ClaimRefused('owner_share');
      }
      held.set(key, { until: expiresAt, owner });
      if (owner !== undefined) owned.set(owner, (owned.get(owner) ?? 0) + 1);
      return true;
    },
    delete: (key: string) => drop(key),
    clear: () => {
      held.clear();
      owned.clear();
    },
  };
}
