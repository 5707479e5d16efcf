import type { Logger } from 'pino';
import type { Cache, LocalCache } from './cache.ts';
import { systemClock, type Clock } from '../time/clock.ts';

/**
 * How long to leave Redis alone after it failed, so an outage costs no timeout per request: then
 * one call asks it again (the others keep to the fallback until that one has its answer), and
 * a Redis that hangs costs one command's time limit each pause.
 */
export const REDIS_RETRY_AFTER_MS = 5_000;

export interface FallbackCache extends Cache {
  /** True while Redis is failing and the in-process cache serves instead. */
  readonly degraded: boolean;
}

/**
 * Redis first; when it fails, the in-process cache, so requests keep being served. The
 * switch is logged once each way, and readiness reports it. Entries written during an outage
 * live only in this process: at worst a login is repeated, never wrongly accepted. A claim is
 * the exception that must outlive the outage: Redis never heard of a key claimed meanwhile, so
 * until such a claim may have expired, one Redis grants is refused when the fallback holds it
 * (a DPoP proof taken during the outage is not taken again once Redis is back). The fallback
 * says how long that may be (`claimsHeldUntil`): with workers it is the supervising process's,
 * so this holds for a claim a sibling took, though this worker never saw Redis fail.
 */
export function createFallbackCache(
  primary: Cache,
  fallback: LocalCache,
  logger: Logger,
  clock: Clock = systemClock,
): FallbackCache {
  let failedAt: number | undefined;
  /** A call is asking Redis whether it is back: every other call keeps to the fallback. */
  let probing = false;

  function failed(): void {
    failedAt = clock.now();
  }

  async function attempt<T>(work: (cache: Cache) => Promise<T>): Promise<T> {
    const probe = failedAt !== undefined;
    if (failedAt !== undefined && (probing || clock.now() - failedAt < REDIS_RETRY_AFTER_MS)) {
      return work(fallback);
    }
    if (probe) probing = true;
    try {
      const result = await work(primary);
      if (failedAt !== undefined) {
        failedAt = undefined;
        logger.warn('Redis is back; the shared cache serves again');
      }
      return result;
    } catch (err) {
      if (failedAt === undefined)
        logger.error({ err }, 'Redis failed; serving from the in-process cache');
      failed();
      return work(fallback);
    } finally {
      if (probe) probing = false;
    }
  }

  return {
    kind: primary.kind,
    get degraded() {
      return failedAt !== undefined;
    },
    get: (key) => attempt((cache) => cache.get(key)),
    increment: (key, windowMs, by) => attempt((cache) => cache.increment(key, windowMs, by)),
    async claim(key, ttlMs, owner) {
      let redisAnswered = false;
      const claimed = await attempt((cache) => {
        redisAnswered = cache === primary;
        return cache.claim(key, ttlMs, owner);
      });
      if (!claimed || !redisAnswered || clock.now() >= fallback.claimsHeldUntil()) return claimed;
      // The fallback (this process's, or the one the workers share) granted claims during an
      // outage, and may hold this key from then.
      return (await fallback.counter(key)) === undefined;
    },
    counter: (key) => attempt((cache) => cache.counter(key)),
    set: (key, value, ttlMs) => attempt((cache) => cache.set(key, value, ttlMs)),
    delete: async (key) => {
      // Both: a deletion (e.g. a revocation) must not survive in either place.
      await fallback.delete(key);
      await attempt((cache) => cache.delete(key));
    },
    /** Never fails: while Redis is down the in-process cache serves, and `degraded` says so. */
    async ping() {
      try {
        await primary.ping();
        failedAt = undefined;
      } catch (err) {
        if (failedAt === undefined)
          logger.error({ err }, 'Redis failed; serving from the in-process cache');
        failed();
      }
    },
    async close() {
      await Promise.all([primary.close(), fallback.close()]);
    },
  };
}
