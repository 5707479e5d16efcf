import { randomUUID } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFallbackCache, REDIS_RETRY_AFTER_MS } from '../../src/cache/fallback-cache.ts';
import { createMemoryCache } from '../../src/cache/memory-cache.ts';
import { createRedisCache } from '../../src/cache/redis-cache.ts';
import type { Cache } from '../../src/cache/cache.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { startTcpFront, type TcpFront } from '../helpers/tcp-front.ts';

const REDIS_URL = new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const KEY_PREFIX = `realmgate-test:${randomUUID().slice(0, 8)}:`;
/** The Redis commands' time limit here (REDIS_COMMAND_TIMEOUT_MS). */
const COMMAND_TIMEOUT_MS = 1000;
/** Requests at once when the fallback's pause ends. */
const CONCURRENT = 20;

/*
 * A Redis that hangs (accepts, never answers: the real Redis behind a TCP relay that stops
 * forwarding, port 19348) costs the command time limit once per pause, not once per request:
 * when a pause of the fallback ends, one call asks Redis again, and the others keep being
 * served from the in-process cache until it answers.
 */
describe('Redis that hangs: one probe per pause', () => {
  let relay: TcpFront;
  let primary: Cache;
  const clock = aheadClock();

  beforeAll(async () => {
    relay = await startTcpFront(19348, {
      host: REDIS_URL.hostname,
      port: Number(REDIS_URL.port || 6379),
    });
    primary = createRedisCache({
      url: `redis://127.0.0.1:${relay.port}`,
      keyPrefix: KEY_PREFIX,
      commandTimeoutMs: COMMAND_TIMEOUT_MS,
    });
  });
  afterAll(async () => {
    relay?.unsilence();
    await primary?.close();
    await relay?.cut();
  });

  it('when a pause ends, one call waits for Redis, the others are served at once', async () => {
    const cache = createFallbackCache(
      primary,
      createMemoryCache({ maxEntries: 100, clock }),
      pino({ level: 'silent' }),
      clock,
    );
    await cache.set('k', 'v', 60_000);
    relay.silence();

    // The first call finds Redis silent and pays the time limit; the pause begins.
    expect(await cache.get('k')).toBeUndefined();
    expect(cache.degraded).toBe(true);

    const waits = async () =>
      Promise.all(
        Array.from({ length: CONCURRENT }, async () => {
          const started = performance.now();
          await cache.get('k');
          return performance.now() - started;
        }),
      );
    for (let pause = 0; pause < 2; pause++) {
      clock.advance(REDIS_RETRY_AFTER_MS);
      const slow = (await waits()).filter((ms) => ms >= COMMAND_TIMEOUT_MS / 2);
      expect(slow).toHaveLength(1);
      expect(cache.degraded).toBe(true);
    }

    relay.unsilence();
    clock.advance(REDIS_RETRY_AFTER_MS);
    expect(await cache.get('k')).toBe('v');
    expect(cache.degraded).toBe(false);
  }, 30_000);
});
