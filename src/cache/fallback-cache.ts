import type { Logger } from 'pino';
import type { Cache } from './cache.ts';
import { systemClock, type Clock } from '../time/clock.ts';

/** How long to leave Redis alone after it failed, so an outage costs no timeout per request. */
export const REDIS_RETRY_AFTER_MS = 5_000;

export interface FallbackCache extends Cache {
  /** True while Redis is failing and the in-process cache serves instead. */
  readonly degraded: boolean;
}

/**
 * Redis first; when it fails, the in-process cache, so requests keep being served. The
 * switch is logged once each way, and readiness reports it. Entries written during an outage
 * live only in this process: at worst a login is repeated, never wrongly accepted.
 */
export function createFallbackCache(
  primary: Cache,
  fallback: Cache,
  logger: Logger,
  clock: Clock = systemClock,
): FallbackCache {
  let failedAt: number | undefined;

  async function attempt<T>(work: (cache: Cache) => Promise<T>): Promise<T> {
    if (failedAt !== undefined && clock.now() - failedAt < REDIS_RETRY_AFTER_MS)
      return work(fallback);
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
      failedAt = clock.now();
      return work(fallback);
    }
  }

  return {
    kind: primary.kind,
    get degraded() {
      return failedAt !== undefined;
    },
    get: (key) => attempt((cache) => cache.get(key)),
    increment: (key, windowMs, by) => attempt((cache) => cache.increment(key, windowMs, by)),
    claim: (key, ttlMs) => attempt((cache) => cache.claim(key, ttlMs)),
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
        failedAt = clock.now();
      }
    },
    async close() {
      await Promise.all([primary.close(), fallback.close()]);
    },
  };
}
