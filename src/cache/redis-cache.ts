import { Redis } from 'ioredis';
import { assertValidTtl, type Cache, type Counter } from './cache.ts';
import { CLAIM_COMMAND, createRedisClaims } from './redis-claims.ts';

export interface RedisCacheOptions {
  /** `redis://` or `rediss://` URL. */
  url: string;
  /** Prepended to every key so several deployments can share one Redis. */
  keyPrefix: string;
  /** Upper bound on any single command, so a stalled Redis cannot hang requests. */
  commandTimeoutMs: number;
}

/**
 * Creates a cache shared between gateway instances. Commands issued while disconnected wait in
 * ioredis's offline queue but fail after one reconnect attempt instead of piling up. Reconnects
 * follow ioredis's default (waits doubling up to 5 s, with jitter so replicas do not all come
 * back at once); the fallback cache serves meanwhile, and a command never waits longer than
 * `commandTimeoutMs`.
 *
 * Auto-pipelining: the commands issued in one turn of the event loop (and while the previous
 * batch is out) leave in one write and their answers are read in one go, which under load takes
 * most of the per-command cost off the gateway. Claims (a DPoP proof's one-time use, one per
 * request) go further: those of a turn are one command (redis-claims.ts). Safe for this
 * client's users: every command here is independent (no SELECT, no blocking or subscribing
 * commands; MULTI transactions are sent as they are, at once), and each caller awaits an answer
 * before its next command on the same key, so only concurrent requests' commands, which had no
 * order between them anyway, may change places. A command waiting behind a batch Redis does not
 * answer fails after that batch's time-out and its own.
 */
export function createRedisCache({ url, keyPrefix, commandTimeoutMs }: RedisCacheOptions): Cache {
  const client = new Redis(url, {
    keyPrefix,
    commandTimeout: commandTimeoutMs,
    maxRetriesPerRequest: 1,
    lazyConnect: false,
    enableAutoPipelining: true,
    autoPipeliningIgnoredCommands: [CLAIM_COMMAND],
  });
  // Without a listener ioredis reports every failed reconnect as an unhandled 'error' event.
  let lastError: Error | undefined;
  client.on('error', (error: Error) => {
    lastError = error;
  });
  const claimKey = createRedisClaims(client);

  return {
    kind: 'redis',
    async get(key) {
      const value = await client.get(key);
      return value ?? undefined;
    },
    async set(key, value, ttlMs) {
      assertValidTtl(ttlMs);
      await client.set(key, value, 'PX', ttlMs);
    },
    async delete(key) {
      await client.del(key);
    },
    async increment(key, windowMs, by = 1) {
      assertValidTtl(windowMs);
      // One round trip, atomic: SET NX starts the window, INCRBY keeps its expiry.
      const replies = await client
        .multi()
        .set(key, '0', 'PX', windowMs, 'NX')
        .incrby(key, by)
        .pttl(key)
        .exec();
      return counterFrom(replies?.[1], replies?.[2])!;
    },
    async claim(key, ttlMs) {
      assertValidTtl(ttlMs);
      // SET NX PX, with the other claims of this turn in one command (redis-claims.ts).
      return claimKey(key, ttlMs);
    },
    async counter(key) {
      const replies = await client.multi().get(key).pttl(key).exec();
      return counterFrom(replies?.[0], replies?.[1]);
    },
    async ping() {
      try {
        await client.ping();
      } catch (error) {
        // The connection error explains more than "max retries reached" or a timeout does.
        throw new Error(`redis unreachable: ${(error as Error).message}`, {
          // eslint-disable-next-line preserve-caught-error -- the connection error is the cause
          cause: lastError ?? error,
        });
      }
    },
    async close() {
      if (client.status !== 'ready') {
        client.disconnect();
        return;
      }
      try {
        await client.quit();
      } catch {
        client.disconnect();
      }
    },
  };
}

type Reply = [error: Error | null, result: unknown] | undefined;

/** A counter from the replies of a read (or INCR) and a PTTL inside one MULTI. */
function counterFrom(value: Reply, ttl: Reply): Counter | undefined {
  const failed = value?.[0] ?? ttl?.[0];
  if (failed) throw failed;
  if (value?.[1] === null || value?.[1] === undefined) return undefined;
  const ttlMs = Number(ttl?.[1]);
  return { count: Number(value[1]), ttlMs: ttlMs > 0 ? ttlMs : 0 };
}
