import { TtlLru } from './ttl-lru.ts';
import type { ReplicaBus } from './replica-bus.ts';
import { systemClock, type Clock } from '../time/clock.ts';

/** How many recent messages a worker remembers, to apply one that arrives twice only once. */
const RECENT_MESSAGES = 10_000;
const RECENT_MS = 60_000;

/**
 * The replica bus of a worker when the gateway has Redis: Redis between replicas, and the
 * supervising process between the workers of this one, so that what one worker revokes holds on
 * its siblings at once even while Redis is down (what goes through Redis waits for it to come
 * back, see revocation.ts). A sibling's message arrives both ways; it is handed on once.
 */
export function combineBuses(
  redis: ReplicaBus,
  ipc: ReplicaBus,
  clock: Clock = systemClock,
): ReplicaBus {
  const seen = new TtlLru<true>(RECENT_MESSAGES, clock);
  const once =
    (channel: string, receive: (payload: string) => void) =>
    (payload: string): void => {
      const key = `${channel}\u0000${payload}`;
      if (seen.get(key)) return;
      seen.set(key, true, clock.now() + RECENT_MS);
      receive(payload);
    };
  return {
    replicaId: redis.replicaId,
    isReady: () => redis.isReady(),
    async subscribe(channel, receive) {
      const receiveOnce = once(channel, receive);
      await ipc.subscribe(channel, receiveOnce);
      await redis.subscribe(channel, receiveOnce);
    },
    async publish(channel, payload) {
      // The siblings first: their channel does not fail with Redis.
      await ipc.publish(channel, payload);
      await redis.publish(channel, payload);
    },
    async keep(key, payload, ttlSeconds) {
      await ipc.keep(key, payload, ttlSeconds);
      await redis.keep(key, payload, ttlSeconds);
    },
    async kept(prefix) {
      const [fromIpc, fromRedis] = await Promise.allSettled([ipc.kept(prefix), redis.kept(prefix)]);
      if (fromRedis.status === 'rejected' && fromIpc.status === 'rejected') throw fromRedis.reason;
      const all = [fromIpc, fromRedis].flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
      return [...new Set(all)];
    },
    onCommandsBack: (listener) => redis.onCommandsBack(listener),
    onSubscriptionBack: (listener) => redis.onSubscriptionBack(listener),
    async close() {
      await ipc.close();
      await redis.close();
    },
  };
}
