import type { IpcPeer } from '../../cache/ipc-peer.ts';

/**
 * The last key set Keycloak served for each realm, kept so tokens can still be verified while no
 * Keycloak node answers (jwks.ts falls back to it then, and only then). A key set is public: what
 * is kept needs no secrecy, only to come from Keycloak, which it does (nothing else writes it).
 * Realms are bounded by what Keycloak serves: a key set is kept only after Keycloak served it.
 */
export interface KeySetMemory {
  /**
   * Keeps `body`, the key set Keycloak just served for `realm` (JSON, already checked) to a
   * fetch that started at `startedAt` (epoch ms).
   */
  remember(realm: string, body: string, startedAt: number): void;
  /** The key set last kept for `realm`, if any. */
  recall(realm: string): Promise<string | undefined>;
  /**
   * Hands `listener` each key set a sibling worker fetched, as it comes (workers only): the
   * registry adopts it and postpones its own next fetch, so the workers of one gateway fetch a
   * realm's set about once per interval between them, not once each.
   */
  onSiblingFetch?(listener: (realm: string, body: string, startedAt: number) => void): void;
}

/** The memory of one process. */
export function createLocalKeySetMemory(): KeySetMemory {
  const keySets = new Map<string, string>();
  return {
    remember: (realm, body) => void keySets.set(realm, body),
    recall: (realm) => Promise.resolve(keySets.get(realm)),
  };
}

/**
 * The memory of a worker: its own, and the supervising process's, which every worker tells what
 * Keycloak served it, and which relays it to the other workers. A worker that never fetched a
 * realm's key set before Keycloak went down then verifies that realm's tokens with the set a
 * sibling fetched (served by ipc-hub.ts).
 */
export function createWorkerKeySetMemory(peer: IpcPeer): KeySetMemory {
  const own = createLocalKeySetMemory();
  return {
    remember(realm, body, startedAt) {
      own.remember(realm, body, startedAt);
      peer.tell('keys.remember', realm, body, startedAt);
    },
    onSiblingFetch(listener) {
      // Only the supervising process sends it (ipc-hub.ts), relaying what Keycloak served a
      // sibling: the same trust as a set this worker fetched. Never from Redis.
      peer.serve('keys.fetched', (realm: string, body: string, startedAt: number) => {
        own.remember(realm, body, startedAt);
        listener(realm, body, startedAt);
      });
    },
    async recall(realm) {
      return (
        (await own.recall(realm)) ??
        (await peer.call<string | null>('keys.recall', realm).catch(() => null)) ??
        undefined
      );
    },
  };
}
