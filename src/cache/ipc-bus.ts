import { randomUUID } from 'node:crypto';
import type { IpcPeer } from './ipc-peer.ts';
import type { ReplicaBus } from './replica-bus.ts';

/**
 * The replica bus between the workers of one gateway without Redis: the supervising process
 * relays each message to every worker and keeps what is kept (ipc-hub.ts). The channel lives as
 * long as the worker, so there is no outage to catch up on: the listeners of `onCommandsBack`
 * and `onSubscriptionBack` never run.
 */
export function createIpcBus(peer: IpcPeer): ReplicaBus {
  const receivers = new Map<string, (payload: string) => void>();
  peer.serve('bus.message', (channel: string, payload: string) =>
    receivers.get(channel)?.(payload),
  );
  return {
    replicaId: randomUUID(),
    keep: (key, payload, ttlSeconds) => peer.call('bus.keep', key, payload, ttlSeconds),
    kept: (prefix) => peer.call<string[]>('bus.kept', prefix),
    isReady: () => true,
    subscribe(channel, receive) {
      receivers.set(channel, receive);
      return Promise.resolve();
    },
    publish: (channel, payload) => peer.call('bus.publish', channel, payload),
    onCommandsBack: () => undefined,
    onSubscriptionBack: () => undefined,
    close() {
      receivers.clear();
      return Promise.resolve();
    },
  };
}
