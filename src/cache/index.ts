import type { Cache } from './cache.ts';
import { createMemoryCache } from './memory-cache.ts';
import { createRedisCache } from './redis-cache.ts';

export type { Cache } from './cache.ts';

export interface CacheOptions {
  /** When set the cache is shared through Redis; otherwise it lives in this process. */
  redisUrl?: string | undefined;
  keyPrefix: string;
  maxEntries: number;
  commandTimeoutMs: number;
}

/** Creates the cache backend the configuration asks for. */
export function createCache(opts: CacheOptions): Cache {
  if (opts.redisUrl) {
    return createRedisCache({
      url: opts.redisUrl,
      keyPrefix: opts.keyPrefix,
      commandTimeoutMs: opts.commandTimeoutMs,
    });
  }
  return createMemoryCache({ maxEntries: opts.maxEntries });
}
