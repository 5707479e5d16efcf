import { pino } from 'pino';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cache } from '../../src/cache/cache.ts';
import { createCache } from '../../src/cache/index.ts';
import { createMemoryCache } from '../../src/cache/memory-cache.ts';
import { createRedisCache } from '../../src/cache/redis-cache.ts';
import { MAX_CLAIMS_PER_COMMAND } from '../../src/cache/redis-claims.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { manualClock } from '../helpers/test-clock.ts';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/** Unique per run so parallel runs and other data in the shared Redis never collide. */
const KEY_PREFIX = `realmgate-test:${randomUUID().slice(0, 8)}:`;

const LONG_TTL_MS = 60_000;

/** A TTL a test lets run out, and the time it lets pass to see it run out. */
interface ShortTtl {
  /** Outlasts the steps a test takes before it lets time pass, by the implementation's clock. */
  shortMs: number;
  pastExpiryMs: number;
}

/**
 * The contract every Cache keeps; `passTime` lets `ms` of the implementation's own clock pass.
 */
function describeCacheContract(
  kind: Cache['kind'],
  create: () => Cache,
  passTime: (ms: number) => Promise<void>,
  { shortMs: SHORT_TTL_MS, pastExpiryMs: PAST_EXPIRY_MS }: ShortTtl,
): void {
  describe(`cache contract (${kind})`, () => {
    let cache: Cache;

    beforeAll(() => {
      cache = create();
    });

    afterAll(async () => {
      await cache.close();
    });

    it('reports its kind', () => {
      expect(cache.kind).toBe(kind);
    });

    it('pings successfully', async () => {
      await expect(cache.ping()).resolves.toBeUndefined();
    });

    it('returns undefined for a missing key', async () => {
      expect(await cache.get(`missing-${randomUUID()}`)).toBeUndefined();
    });

    it('stores and returns a value', async () => {
      await cache.set('plain', 'value-1', LONG_TTL_MS);
      expect(await cache.get('plain')).toBe('value-1');
    });

    it('distinguishes an empty string from a missing key', async () => {
      await cache.set('empty', '', LONG_TTL_MS);
      expect(await cache.get('empty')).toBe('');
    });

    it('overwrites an existing value', async () => {
      await cache.set('overwrite', 'first', LONG_TTL_MS);
      await cache.set('overwrite', 'second', LONG_TTL_MS);
      expect(await cache.get('overwrite')).toBe('second');
    });

    it('deletes a value, and deleting a missing key is harmless', async () => {
      await cache.set('doomed', 'x', LONG_TTL_MS);
      await cache.delete('doomed');
      expect(await cache.get('doomed')).toBeUndefined();
      await expect(cache.delete('doomed')).resolves.toBeUndefined();
    });

    it('expires values after their TTL', async () => {
      await cache.set('short', 'soon gone', SHORT_TTL_MS);
      await cache.set('long', 'stays', LONG_TTL_MS);
      expect(await cache.get('short')).toBe('soon gone');
      await passTime(PAST_EXPIRY_MS);
      expect(await cache.get('short')).toBeUndefined();
      expect(await cache.get('long')).toBe('stays');
    });

    it('restarts the TTL when a value is overwritten', async () => {
      await cache.set('renewed', 'old', SHORT_TTL_MS);
      await cache.set('renewed', 'new', LONG_TTL_MS);
      await passTime(PAST_EXPIRY_MS);
      expect(await cache.get('renewed')).toBe('new');
    });

    it('keeps unicode keys and values intact', async () => {
      const value = 'héllo ✓ 日本語 🎉 \u0000 end';
      await cache.set('clé-🔑', value, LONG_TTL_MS);
      expect(await cache.get('clé-🔑')).toBe(value);
    });

    it('counts in a fixed window: the first increment sets the expiry, later ones keep it', async () => {
      const key = `counter-${randomUUID()}`;
      expect(await cache.counter(key)).toBeUndefined();
      const first = await cache.increment(key, SHORT_TTL_MS);
      expect(first.count).toBe(1);
      expect(first.ttlMs).toBeGreaterThan(0);
      expect(first.ttlMs).toBeLessThanOrEqual(SHORT_TTL_MS);
      await cache.increment(key, LONG_TTL_MS);
      expect((await cache.increment(key, LONG_TTL_MS, -1)).count).toBe(1);
      expect((await cache.increment(key, LONG_TTL_MS, 3)).count).toBe(4);
      const read = await cache.counter(key);
      expect(read?.count).toBe(4);
      expect(read!.ttlMs).toBeLessThanOrEqual(SHORT_TTL_MS);
      await passTime(PAST_EXPIRY_MS);
      expect(await cache.counter(key)).toBeUndefined();
      expect((await cache.increment(key, LONG_TTL_MS)).count).toBe(1);
    });

    it('deletes a counter', async () => {
      const key = `counter-${randomUUID()}`;
      await cache.increment(key, LONG_TTL_MS);
      await cache.delete(key);
      expect(await cache.counter(key)).toBeUndefined();
    });

    it('claims a key once until it expires, many claimants at once included', async () => {
      const key = `claim-${randomUUID()}`;
      const claims = await Promise.all(
        Array.from({ length: 8 }, () => cache.claim(key, SHORT_TTL_MS)),
      );
      expect(claims.filter(Boolean)).toHaveLength(1);
      expect(await cache.claim(key, LONG_TTL_MS)).toBe(false);
      await passTime(PAST_EXPIRY_MS);
      expect(await cache.claim(key, LONG_TTL_MS)).toBe(true);
      expect(await cache.claim(key, LONG_TTL_MS)).toBe(false);
      await cache.delete(key);
      expect(await cache.claim(key, LONG_TTL_MS)).toBe(true);
    });

    it('claims as a counter is first incremented: each refuses what the other wrote', async () => {
      // Replicas of before (increment) and after (claim) refuse each other's DPoP replays.
      const claimed = `claim-${randomUUID()}`;
      expect(await cache.claim(claimed, LONG_TTL_MS)).toBe(true);
      expect((await cache.increment(claimed, LONG_TTL_MS)).count).toBe(2);
      const counted = `claim-${randomUUID()}`;
      expect((await cache.increment(counted, LONG_TTL_MS)).count).toBe(1);
      expect(await cache.claim(counted, LONG_TTL_MS)).toBe(false);
    });

    it('rejects non-positive TTLs', async () => {
      await expect(cache.claim('bad-ttl-claim', 0)).rejects.toThrow(RangeError);
      await expect(cache.set('bad-ttl', 'x', 0)).rejects.toThrow(RangeError);
      await expect(cache.set('bad-ttl', 'x', -5)).rejects.toThrow(RangeError);
      expect(await cache.get('bad-ttl')).toBeUndefined();
    });
  });
}

const memoryClock = manualClock();
describeCacheContract(
  'memory',
  () => createMemoryCache({ maxEntries: 100, clock: memoryClock }),
  (ms) => Promise.resolve(memoryClock.advance(ms)),
  // A clock only the test moves: no step outlasts even a short TTL.
  { shortMs: 50, pastExpiryMs: 200 },
);
describeCacheContract(
  'redis',
  () => createRedisCache({ url: REDIS_URL, keyPrefix: KEY_PREFIX, commandTimeoutMs: 2_000 }),
  redisTimePassed,
  // Redis's real clock runs while a loaded machine stalls the test between its steps (a get
  // right after a set, four increments, a claim still held): seconds, not milliseconds.
  { shortMs: 3_000, pastExpiryMs: 3_200 },
);

/**
 * Redis expires keys by its own clock, which no test moves: `ms` of it have passed once a key
 * written now with that TTL is gone (polled, not slept).
 */
async function redisTimePassed(ms: number): Promise<void> {
  const marker = `${KEY_PREFIX}time-${randomUUID()}`;
  await raw.set(marker, '1', 'PX', ms);
  await expect
    .poll(() => raw.exists(marker), { timeout: ms + EVENTUALLY.timeout, interval: 10 })
    .toBe(0);
}

/** Direct client for inspecting what the cache wrote and for removing this run's keys. */
const raw = new Redis(REDIS_URL);

afterAll(async () => {
  const keys = await raw.keys(`${KEY_PREFIX}*`);
  if (keys.length > 0) await raw.del(...keys);
  await raw.quit();
});

describe('redis cache specifics', () => {
  it('stores keys under the prefix with a millisecond TTL', async () => {
    const cache = createRedisCache({
      url: REDIS_URL,
      keyPrefix: KEY_PREFIX,
      commandTimeoutMs: 2_000,
    });
    try {
      await cache.set('prefixed', 'v', LONG_TTL_MS);
      expect(await raw.get(`${KEY_PREFIX}prefixed`)).toBe('v');
      const ttl = await raw.pttl(`${KEY_PREFIX}prefixed`);
      expect(ttl).toBeGreaterThan(LONG_TTL_MS - 5_000);
      expect(ttl).toBeLessThanOrEqual(LONG_TTL_MS);
      expect(await cache.claim('claimed', LONG_TTL_MS)).toBe(true);
      expect(await raw.get(`${KEY_PREFIX}claimed`)).toBe('1');
      expect(await raw.pttl(`${KEY_PREFIX}claimed`)).toBeGreaterThan(LONG_TTL_MS - 5_000);
    } finally {
      await cache.close();
    }
  });

  it('answers each claim of one turn for its own key and expiry, past one command of them', async () => {
    const cache = createRedisCache({
      url: REDIS_URL,
      keyPrefix: KEY_PREFIX,
      commandTimeoutMs: 2_000,
    });
    try {
      const run = randomUUID();
      await raw.set(`${KEY_PREFIX}batch-${run}-7`, '1', 'PX', LONG_TTL_MS);
      const count = MAX_CLAIMS_PER_COMMAND * 2 + 3;
      // Issued in one turn: they leave together, in three commands.
      const claims = await Promise.all(
        Array.from({ length: count }, (_, i) =>
          cache.claim(`batch-${run}-${i}`, i === 1 ? 5_000 : LONG_TTL_MS),
        ),
      );
      expect(claims.filter((claimed) => !claimed)).toHaveLength(1);
      expect(claims[7]).toBe(false);
      expect(await raw.get(`${KEY_PREFIX}batch-${run}-${count - 1}`)).toBe('1');
      expect(await raw.pttl(`${KEY_PREFIX}batch-${run}-1`)).toBeLessThanOrEqual(5_000);
      expect(await raw.pttl(`${KEY_PREFIX}batch-${run}-2`)).toBeGreaterThan(5_000);
      // Each key once: a second turn of the same claims finds them all taken.
      const again = await Promise.all(
        Array.from({ length: count }, (_, i) => cache.claim(`batch-${run}-${i}`, LONG_TTL_MS)),
      );
      expect(again.some(Boolean)).toBe(false);
    } finally {
      await cache.close();
    }
  });

  it('rejects each claim of a batch Redis does not take', async () => {
    const cache = createRedisCache({
      url: 'redis://127.0.0.1:1',
      keyPrefix: KEY_PREFIX,
      commandTimeoutMs: 500,
    });
    try {
      const claims = ['a', 'b', 'c'].map((key) => cache.claim(key, LONG_TTL_MS));
      for (const claim of claims) await expect(claim).rejects.toThrow();
    } finally {
      await cache.close();
    }
  });

  it('rejects ping when Redis is unreachable, and still closes', async () => {
    const cache = createRedisCache({
      url: 'redis://127.0.0.1:1',
      keyPrefix: KEY_PREFIX,
      commandTimeoutMs: 500,
    });
    try {
      await expect(cache.ping()).rejects.toThrow(/redis unreachable/);
    } finally {
      await cache.close();
    }
  });
});

const silent = pino({ level: 'silent' });

describe('createCache', () => {
  it('chooses memory without a Redis URL', async () => {
    const cache = createCache({
      keyPrefix: 'p:',
      maxEntries: 10,
      commandTimeoutMs: 1_000,
      logger: silent,
    });
    expect(cache.kind).toBe('memory');
    await cache.close();
  });

  it('chooses Redis with a Redis URL', async () => {
    const cache = createCache({
      redisUrl: REDIS_URL,
      keyPrefix: KEY_PREFIX,
      maxEntries: 10,
      commandTimeoutMs: 1_000,
      logger: silent,
    });
    expect(cache.kind).toBe('redis');
    await expect(cache.ping()).resolves.toBeUndefined();
    await cache.close();
  });
});
