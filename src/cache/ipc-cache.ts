import { assertValidTtl, type Cache, type Counter } from './cache.ts';
import type { IpcPeer } from './ipc-peer.ts';

/**
 * The cache the workers of one gateway share without Redis: each operation runs on the
 * supervising process's one in-memory cache (ipc-hub.ts). Only what must be shared goes through
 * it (the login throttle's counters, the single-flight of cold Basic logins and their outcomes);
 * verified tokens stay in each worker's own memory, off IPC.
 */
export function createIpcCache(peer: IpcPeer): Cache {
  return {
    kind: 'memory',
    get: (key) => peer.call<string | undefined>('cache.get', key),
    async set(key, value, ttlMs) {
      assertValidTtl(ttlMs);
      await peer.call('cache.set', key, value, ttlMs);
    },
    delete: (key) => peer.call('cache.delete', key),
    async increment(key, windowMs, by) {
      assertValidTtl(windowMs);
      return peer.call<Counter>('cache.increment', key, windowMs, by);
    },
    async claim(key, ttlMs) {
      assertValidTtl(ttlMs);
      return peer.call<boolean>('cache.claim', key, ttlMs);
    },
    counter: (key) => peer.call<Counter | undefined>('cache.counter', key),
    // The channel to the supervising process is this worker's life line: it is there or the
    // worker has exited.
    ping: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
}
