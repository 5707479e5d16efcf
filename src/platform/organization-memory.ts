import type { IpcPeer } from '../cache/ipc-peer.ts';
import type { OrganizationState } from '../tenancy/organization-state.ts';

/** What a worker's siblings confirmed of an organization, and when (epoch ms). */
export interface RecalledOrganization {
  state: 'enabled' | 'disabled';
  at: number;
}

/**
 * What the workers of one gateway know of organizations between them, kept by the supervising
 * process (cache/ipc-hub.ts): a worker started while the database is down serves the
 * organizations its siblings confirmed, as they do. Not across replicas (each asks its database).
 */
export interface OrganizationMemory {
  /**
   * Tells what this worker learned of `id` at `at` (epoch ms), kept until `keptUntil`: a database
   * answer as of the moment it was asked, or a change (a deletion kept as such, so that an
   * older answer told later cannot bring the organization back). Newer knowledge wins.
   */
  note(id: string, state: OrganizationState, at: number, keptUntil: number): void;
  /** What a sibling confirmed of `id`, if anything is kept: never an absent organization. */
  recall(id: string): Promise<RecalledOrganization | undefined>;
}

/** A worker's memory: the supervising process's, over its IPC channel. */
export function createWorkerOrganizationMemory(peer: IpcPeer): OrganizationMemory {
  return {
    note(id, state, at, keptUntil) {
      peer.tell('organizations.note', id, state, at, keptUntil);
    },
    async recall(id) {
      const kept = await peer
        .call<{ state: OrganizationState; at: number } | null>('organizations.recall', id)
        .catch(() => null);
      if (kept === null || kept.state === 'absent') return undefined;
      return { state: kept.state, at: kept.at };
    },
  };
}
