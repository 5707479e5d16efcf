import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';

/**
 * What replicas, and the workers of one gateway, tell each other (revocations, organization
 * changes): through Redis (here: one connection that publishes and runs commands, one that
 * listens, for every kind of message), or without Redis through the supervising process
 * (ipc-bus.ts).
 */
export interface ReplicaBus {
  /** This replica's name in messages: each replica also receives what it published itself. */
  readonly replicaId: string;
  /**
   * Keeps `payload` under `key` for `ttlSeconds`, for replicas that start later (stored
   * revocations); rejects when the store does not take it.
   */
  keep(key: string, payload: string, ttlSeconds: number): Promise<void>;
  /** Every payload kept under a key that starts with `prefix` and has not expired. */
  kept(prefix: string): Promise<string[]>;
  /** Whether Redis takes commands right now. */
  isReady(): boolean;
  /**
   * Hands `receive` every payload published on `channel`, this replica's own included. Resolves
   * once Redis confirmed the subscription; while Redis is down it is made when Redis is back.
   */
  subscribe(channel: string, receive: (payload: string) => void): Promise<void>;
  /** Publishes `payload` on `channel`; rejects when Redis does not take it. */
  publish(channel: string, payload: string): Promise<void>;
  /**
   * Runs `listener` each time Redis takes commands again after an outage (or a start without
   * it): for what could not be sent meanwhile.
   */
  onCommandsBack(listener: () => void): void;
  /**
   * Runs `listener` each time the subscriptions are back after an outage (or a start without
   * Redis): for what was published while they were down, and so missed.
   */
  onSubscriptionBack(listener: () => void): void;
  close(): Promise<void>;
}

/**
 * Connects to Redis (both connections ready, or logged as unreachable: the replica then runs on
 * alone and catches up when Redis is back; ioredis keeps reconnecting).
 */
export async function createReplicaBus(options: {
  redisUrl: string;
  logger: Logger;
}): Promise<ReplicaBus> {
  // Reconnects every 200 ms at most (ioredis's default doubles its wait up to 5 s): a revocation
  // made during an outage must reach the other replicas soon after Redis is back.
  const redisOptions = {
    maxRetriesPerRequest: 1,
    commandTimeout: 1000,
    lazyConnect: true,
    retryStrategy: (attempt: number) => Math.min(attempt * 50, 200),
  };
  const publisher = new Redis(options.redisUrl, redisOptions);
  const subscriber = new Redis(options.redisUrl, redisOptions);
  for (const client of [publisher, subscriber]) {
    client.on('error', (err: Error) => options.logger.warn({ err }, 'replica bus: Redis error'));
  }
  const receivers = new Map<string, (payload: string) => void>();
  subscriber.on('message', (channel: string, payload: string) => receivers.get(channel)?.(payload));
  try {
    await subscriber.connect();
    await publisher.connect();
  } catch (err) {
    options.logger.error(
      { err },
      'revocations and organization changes are not shared until Redis is reachable',
    );
  }
  /** Subscribes every channel a receiver waits on; false when Redis refused or did not answer. */
  const subscribeAll = async (): Promise<boolean> => {
    if (receivers.size === 0) return true;
    try {
      await subscriber.subscribe(...receivers.keys());
      return true;
    } catch (err) {
      options.logger.warn({ err }, 'replica bus: not subscribed until Redis is back');
      return false;
    }
  };
  // The first 'ready' of each came before this point (connect() waits for it): these are
  // reconnections. ioredis subscribes again by itself to what it had subscribed; a channel whose
  // subscription failed is subscribed here (subscribing twice changes nothing).
  const commandsBack: (() => void)[] = [];
  const subscriptionBack: (() => void)[] = [];
  subscriber.on('ready', () => {
    void subscribeAll().then((subscribed) => {
      if (subscribed) subscriptionBack.forEach((listener) => listener());
    });
  });
  publisher.on('ready', () => commandsBack.forEach((listener) => listener()));

  return {
    replicaId: randomUUID(),
    async keep(key, payload, ttlSeconds) {
      await publisher.set(key, payload, 'EX', ttlSeconds);
    },
    async kept(prefix) {
      const payloads: string[] = [];
      let cursor = '0';
      do {
        const [next, keys] = await publisher.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
        cursor = next;
        for (const key of keys) {
          const payload = await publisher.get(key);
          if (payload) payloads.push(payload);
        }
      } while (cursor !== '0');
      return payloads;
    },
    isReady: () => publisher.status === 'ready',
    async subscribe(channel, receive) {
      receivers.set(channel, receive);
      if (subscriber.status === 'ready') await subscribeAll();
    },
    async publish(channel, payload) {
      await publisher.publish(channel, payload);
    },
    onCommandsBack: (listener) => void commandsBack.push(listener),
    onSubscriptionBack: (listener) => void subscriptionBack.push(listener),
    async close() {
      subscriber.disconnect();
      await publisher.quit().catch(() => publisher.disconnect());
    },
  };
}
