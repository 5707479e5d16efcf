import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { Cache } from '../../../src/cache/cache.ts';
import { createFallbackCache, REDIS_RETRY_AFTER_MS } from '../../../src/cache/fallback-cache.ts';
import { createMemoryCache } from '../../../src/cache/memory-cache.ts';
import { manualClock } from '../../helpers/test-clock.ts';

/** A Redis that hangs: every command fails once its time limit (here 50 ms) has passed. */
function hangingRedis(): Cache & { asked: number; back(): void } {
  let hanging = true;
  const store = new Map<string, string>();
  const command = <T>(answer: () => T): Promise<T> => {
    redis.asked += 1;
    if (!hanging) return Promise.resolve(answer());
    return new Promise((_, reject) => setTimeout(() => reject(new Error('Command timed out')), 50));
  };
  const redis = {
    kind: 'redis' as const,
    asked: 0,
    back() {
      hanging = false;
    },
    get: (key: string) => command(() => store.get(key)),
    set: (key: string, value: string) => command(() => void store.set(key, value)),
    delete: (key: string) => command(() => void store.delete(key)),
    increment: () => command(() => ({ count: 1, ttlMs: 1000 })),
    claim: () => command(() => true),
    counter: () => command(() => undefined),
    ping: () => command(() => undefined),
    close: () => Promise.resolve(),
  };
  return redis;
}

describe('fallback cache: a Redis that hangs', () => {
  it('is asked again by one call when a pause ends, the others served from the fallback meanwhile', async () => {
    const clock = manualClock();
    const redis = hangingRedis();
    const cache = createFallbackCache(
      redis,
      createMemoryCache({ maxEntries: 100, clock }),
      pino({ level: 'silent' }),
      clock,
    );
    await cache.get('k');
    expect(cache.degraded).toBe(true);
    expect(redis.asked).toBe(1);

    for (let pause = 1; pause <= 2; pause++) {
      clock.advance(REDIS_RETRY_AFTER_MS);
      await Promise.all(Array.from({ length: 20 }, () => cache.get('k')));
      // One call waited for Redis's time limit; nineteen did not.
      expect(redis.asked).toBe(1 + pause);
      expect(cache.degraded).toBe(true);
    }

    redis.back();
    clock.advance(REDIS_RETRY_AFTER_MS);
    await Promise.all(Array.from({ length: 20 }, () => cache.get('k')));
    expect(cache.degraded).toBe(false);
    // Once Redis answered the one call, the rest go to it again.
    await cache.get('k');
    expect(redis.asked).toBe(1 + 2 + 1 + 1);
  });
});
