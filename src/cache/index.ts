import type { Logger } from 'pino';
import type { Cache, LocalCache } from './cache.ts';
import { createFallbackCache } from './fallback-cache.ts';
import { createMemoryCache } from './memory-cache.ts';
import { createRedisCache } from './redis-cache.ts';
import type { Clock } from '../time/clock.ts';

export type { Cache } from './cache.ts';

export interface CacheOptions {
  /** When set the cache is shared through Redis; otherwise it lives in this process. */
  redisUrl?: string | undefined;
  keyPrefix: string;
  maxEntries: number;
  commandTimeoutMs: number;
  logger: Logger;
  /**
   * What serves without Redis, or while it fails: by default a cache in this process; in a
   * worker, the supervising process's (ipc-cache.ts), so the workers stay one gateway.
   */
  local?: LocalCache | undefined;
  clock?: Clock;
}

/**
 * Creates the cache the configuration asks for: Redis (falling back to the local cache while
 * Redis fails) when `redisUrl` is set, otherwise the local cache alone.
 */
export function createCache(opts: CacheOptions): Cache {
  const local = opts.local ?? createMemoryCache({ maxEntries: opts.maxEntries, clock: opts.clock });
  if (!opts.redisUrl) return local;
  const redis = createRedisCache({
    url: opts.redisUrl,
    keyPrefix: opts.keyPrefix,
    commandTimeoutMs: opts.commandTimeoutMs,
  });
  return createFallbackCache(redis, local, opts.logger, opts.clock);
}
