import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { createProofReplayStore } from '../../../../src/auth/dpop/dpop-replay.ts';
import type { Cache } from '../../../../src/cache/cache.ts';
import { createFallbackCache } from '../../../../src/cache/fallback-cache.ts';
import { createMemoryCache } from '../../../../src/cache/memory-cache.ts';
import { manualClock } from '../../../helpers/test-clock.ts';

const clock = manualClock();
const proof = (jti: string) => ({ jti, acceptableUntil: clock.now() + 60_000 });

/** A shared cache (two replicas' view of one Redis) that can be made to fail. */
function sharedRedis() {
  const store = createMemoryCache({ maxEntries: 100, clock });
  let down = false;
  const guard = <T>(work: () => Promise<T>) =>
    down ? Promise.reject(new Error('Redis down')) : work();
  const cache: Cache = {
    kind: 'redis',
    get: (key) => guard(() => store.get(key)),
    set: (key, value, ttl) => guard(() => store.set(key, value, ttl)),
    delete: (key) => guard(() => store.delete(key)),
    increment: (key, window, by) => guard(() => store.increment(key, window, by)),
    claim: (key, ttl) => guard(() => store.claim(key, ttl)),
    counter: (key) => guard(() => store.counter(key)),
    ping: () => guard(() => store.ping()),
    close: () => Promise.resolve(),
  };
  return { cache, fail: () => (down = true) };
}

const replicaOn = (redis: Cache) =>
  createProofReplayStore({
    cache: createFallbackCache(
      redis,
      createMemoryCache({ maxEntries: 100, clock }),
      pino({ enabled: false }),
      clock,
    ),
    clock,
  });

describe('the replay store of DPoP proofs', () => {
  it('accepts a jti once per key across replicas sharing Redis, the same jti of another key too', async () => {
    const redis = sharedRedis();
    const [a, b] = [replicaOn(redis.cache), replicaOn(redis.cache)];
    expect(await a.firstUse('key-1', proof('j1'))).toBe(true);
    expect(await b.firstUse('key-1', proof('j1'))).toBe(false);
    expect(await b.firstUse('key-2', proof('j1'))).toBe(true);
  });

  it('forgets a jti once its proof is out of the window', async () => {
    const redis = sharedRedis();
    const store = replicaOn(redis.cache);
    const made = proof('j2');
    expect(await store.firstUse('key-1', made)).toBe(true);
    clock.advance(60_001);
    expect(await store.firstUse('key-1', made)).toBe(true);
  });

  it('while Redis fails, falls back as the cache does: once per process, not across replicas', async () => {
    const redis = sharedRedis();
    const [a, b] = [replicaOn(redis.cache), replicaOn(redis.cache)];
    redis.fail();
    expect(await a.firstUse('key-1', proof('j3'))).toBe(true);
    expect(await a.firstUse('key-1', proof('j3'))).toBe(false);
    // The documented gap: the other replica's memory has not seen it.
    expect(await b.firstUse('key-1', proof('j3'))).toBe(true);
  });
});
