import type { ReplicaBus } from '../../src/cache/replica-bus.ts';

/**
 * One channel space shared by the buses it makes, as Redis' publish is (senders included), and
 * a way to publish on it as anyone with access to Redis can.
 */
export function sharedChannels() {
  const receivers: Array<{ channel: string; receive: (payload: string) => void }> = [];
  return {
    publish(channel: string, payload: string) {
      for (const r of receivers) if (r.channel === channel) r.receive(payload);
    },
    busOf(replicaId: string, failing = false): ReplicaBus {
      return {
        replicaId,
        keep: () => Promise.resolve(),
        kept: () => Promise.resolve([]),
        isReady: () => !failing,
        subscribe: (channel, receive) => {
          receivers.push({ channel, receive });
          return Promise.resolve();
        },
        publish: (channel, payload) => {
          if (failing) return Promise.reject(new Error('Redis is down'));
          this.publish(channel, payload);
          return Promise.resolve();
        },
        onCommandsBack: () => undefined,
        onSubscriptionBack: () => undefined,
        close: () => Promise.resolve(),
      };
    },
  };
}
