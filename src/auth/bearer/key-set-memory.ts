import type { IpcPeer } from '../../cache/ipc-peer.ts';

/**
 * The last key set Keycloak served for each realm, kept so tokens can still be verified while no
 * Keycloak node answers (jwks.ts falls back to it then, and only then). A key set is public: what
 * is kept needs no secrecy, only to come from Keycloak, which it does (nothing else writes it).
 * Realms are bounded by what Keycloak serves: a key set is kept only after Keycloak served it.
 */
export interface KeySetMemory {
  /** Keeps `body`, the key set Keycloak just served for `realm` (JSON, already checked). */
  remember(realm: string, body: string): void;
  /** The key set last kept for `realm`, if any. */
  recall(realm: string): Promise<string | undefined>;
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
 * Keycloak served it. A worker that never fetched a realm's key set before Keycloak went down
 * then verifies that realm's tokens with the set a sibling fetched (served by ipc-hub.ts).
 */
export function createWorkerKeySetMemory(peer: IpcPeer): KeySetMemory {
  const own = createLocalKeySetMemory();
  return {
    remember(realm, body) {
      own.remember(realm, body);
      peer.tell('keys.remember', realm, body);
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
