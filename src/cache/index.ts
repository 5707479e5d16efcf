import type { Logger } from 'pino';
import type { Cache } from './cache.ts';
import { createFallbackCache } from './fallback-cache.ts';
import { createMemoryCache } from './memory-cache.ts';
import { createRedisCache } from './redis-cache.ts';

export type { Cache } from './cache.ts';

export interface CacheOptions {
  /** When set the cache is shared through Redis; otherwise it lives in this process. */
  redisUrl?: string | undefined;
  keyPrefix: string;
  maxEntries: number;
  commandTimeoutMs: number;
  logger: Logger;
}

/**
 * Creates the cache the configuration asks for: Redis (falling back to the in-process cache
 * while Redis fails) when `redisUrl` is set, otherwise the in-process cache alone.
 */
export function createCache(opts: CacheOptions): Cache {
  const memory = createMemoryCache({ maxEntries: opts.maxEntries });
  if (!opts.redisUrl) return memory;
  const redis = createRedisCache({
    url: opts.redisUrl,
    keyPrefix: opts.keyPrefix,
    commandTimeoutMs: opts.commandTimeoutMs,
  });
  return createFallbackCache(redis, memory, opts.logger);
}
