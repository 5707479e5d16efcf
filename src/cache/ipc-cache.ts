import {
  assertValidTtl,
  ClaimRefused,
  type ClaimRefusal,
  type Counter,
  type LocalCache,
} from './cache.ts';
import type { IpcPeer } from './ipc-peer.ts';

/**
 * The cache the workers of one gateway share without Redis: each operation runs on the
 * supervising process's one in-memory cache (ipc-hub.ts). Only what must be shared goes through
 * it (the login throttle's counters, the single-flight of cold Basic logins and their outcomes);
 * verified tokens stay in each worker's own memory, off IPC.
 */
export function createIpcCache(peer: IpcPeer): LocalCache {
  // Until when a claim the shared cache granted (a sibling's, during a Redis outage) may be
  // held: the supervising process tells every worker as it moves on, before it answers that
  // claim; a worker that starts later asks once.
  let claimsHeldUntil = 0;
  const held = (until: number) => {
    claimsHeldUntil = Math.max(claimsHeldUntil, until);
  };
  peer.serve('cache.claimsHeld', held);
  void peer.call<number>('cache.claimsHeldUntil').then(held, () => undefined);
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
    async claim(key, ttlMs, owner) {
      assertValidTtl(ttlMs);
      // Undefined does not cross the channel: null says "no owner".
      const answer = await peer.call<boolean | { refused: ClaimRefusal }>(
        'cache.claim',
        key,
        ttlMs,
        owner ?? null,
      );
      if (typeof answer === 'object') throw new ClaimRefused(answer.refused);
      return answer;
    },
    counter: (key) => peer.call<Counter | undefined>('cache.counter', key),
    claimsHeldUntil: () => claimsHeldUntil,
    // The channel to the supervising process is this worker's life line: it is there or the
    // worker has exited.
    ping: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
}
