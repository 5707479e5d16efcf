import type { OrganizationLookup, OrganizationState } from '../tenancy/organization-state.ts';
import { TtlLru } from '../cache/ttl-lru.ts';
import { isDatabaseUnavailable } from '../db/database-failures.ts';
import { createLookupBudget } from '../edge/lookup-budget.ts';
import { AppError } from '../envelope/errors.ts';
import type { OrganizationMemory } from './organization-memory.ts';
import type { OrganizationsRepo } from './organizations.repo.ts';
import { systemClock, type Clock } from '../time/clock.ts';

/** How long a confirmed organization is trusted before the database is asked again. */
const FRESH_MS = 60_000;
/**
 * How long an organization confirmed once is still served while the database cannot be asked
 * (by this worker, or by one that recalls it from the siblings' memory: the same hour).
 */
const STALE_MS = 60 * 60_000;
/** How long an unknown id answers 404 without the database (a new organization waits this long). */
const UNKNOWN_MS = 5_000;
const MAX_ENTRIES = 10_000;
/**
 * Database lookups for ids in neither cache, per worker process (each builds its own directory:
 * `WORKERS` times this per replica), and one client's part of them. Not divided among the
 * workers: they are primary-key reads, 800 a second at most from 16 workers, which cost
 * PostgreSQL little, and divided each worker would confirm a real organization's first requests
 * at a sixteenth of the rate.
 */
const LOOKUPS = { perSecond: 50, clientPerSecond: 10, keptForOthers: 10, maxClients: MAX_ENTRIES };

/** The directory admission reads, plus what this replica learns of changes (organization-events.ts). */
export interface OrganizationDirectory extends OrganizationLookup {
  /**
   * Takes a change made through the API (here or on another replica) at once, without the
   * database: the new state is trusted like a fresh lookup.
   */
  learn(id: string, state: OrganizationState): void;
  /**
   * Reads the organization from the database again after a change was learned, and takes its
   * answer: the messages of two changes made at nearly the same moment (on two replicas) may
   * arrive in the reverse of the order they were committed in, and the last one learned is then
   * not the organization's state. Always a read of its own, never one under way (asked before
   * the change); its answer is taken unless another change is learned while it runs (that one
   * re-reads in turn). With the database unreachable the learned state stays. Rejects only on an
   * error other than the database being unavailable.
   */
  reread(id: string): Promise<void>;
  /**
   * Whether this process knows the organization exists (confirmed within the hour, by a lookup,
   * a sibling or a change), from memory only: never a database lookup.
   */
  isKnown(id: string): boolean;
}

/**
 * Answers "does this organization exist, and is it enabled" for every API request without a
 * database round trip each time. Real organizations and unknown ids live in separate bounded
 * caches, so a flood of random ids can never evict a real organization; and ids in neither
 * cache reach the database at most `LOOKUPS.perSecond` times a second, spent by client
 * (edge/lookup-budget.ts): a flood of made-up ids from one address cannot spend the others'
 * lookups, and a real organization not confirmed yet is still looked up for them.
 * Past either rate, an organization confirmed before is still served (for up to an hour), and
 * an id never seen is refused 503 `databaseUnavailable` with Retry-After (never "absent": it
 * may be real). With the database unreachable, an organization confirmed before is served the
 * same way; in a worker, so is one a sibling confirmed (`memory`, told every answer and change):
 * a worker started during the outage serves what its siblings do, aged from their confirmation,
 * and never an organization deleted since. Changes made on another replica arrive
 * through `learn`, each followed by a `reread` whose answer wins (messages may arrive out of
 * order), else with the next lookup (at most `FRESH_MS` later).
 */
export function createOrganizationDirectory(
  repo: Pick<OrganizationsRepo, 'find'>,
  clock: Clock = systemClock,
  memory?: OrganizationMemory,
): OrganizationDirectory {
  const now = () => clock.now();
  /** Real organizations: when each was last confirmed, and whether it was enabled then. */
  const confirmed = new TtlLru<{ at: number; enabled: boolean }>(MAX_ENTRIES, clock);
  const unknown = new TtlLru<true>(MAX_ENTRIES, clock);
  const lookups = new Map<string, Promise<OrganizationState>>();
  const lookupBudget = createLookupBudget(LOOKUPS, clock);
  /**
   * The database reads of each id under way (a lookup, re-reads), each marked `overtaken` when a
   * change of the id is learned while it runs: its answer is older than what was taught and must
   * not overwrite it. Per read: a re-read asked after the change overwrites it. Per id: a change
   * of another organization says nothing of this one's answer.
   */
  const reads = new Map<string, Set<{ overtaken: boolean }>>();

  function remember(id: string, state: OrganizationState): void {
    if (state === 'absent') {
      confirmed.delete(id);
      unknown.set(id, true, now() + UNKNOWN_MS);
    } else {
      unknown.delete(id);
      confirmed.set(id, { at: now(), enabled: state === 'enabled' }, now() + STALE_MS);
    }
  }

  function cachedState(id: string): OrganizationState | undefined {
    const entry = confirmed.get(id);
    if (entry !== undefined) return entry.enabled ? 'enabled' : 'disabled';
    return unknown.get(id) ? 'absent' : undefined;
  }

  /**
   * Asks the database about `id`; its answer is remembered unless a change was learned meanwhile.
   * `afterChange`: a re-read, whose "absent" confirms a deletion and is kept in the siblings'
   * memory as the deletion was (`learn`), not as an unknown id's answer, which only forgets.
   */
  async function ask(id: string, afterChange = false): Promise<OrganizationState> {
    const read = { overtaken: false };
    let pending = reads.get(id);
    if (!pending) reads.set(id, (pending = new Set()));
    pending.add(read);
    const askedAt = now();
    try {
      const found = await repo.find(id);
      const state = !found ? 'absent' : found.enabled ? 'enabled' : 'disabled';
      if (!read.overtaken) remember(id, state);
      // As of when it was asked: a change learned since is newer. Absent when looked up: only
      // forgets (made-up ids must not fill the memory).
      const forgets = state === 'absent' && !afterChange;
      memory?.note(id, state, askedAt, forgets ? askedAt : askedAt + STALE_MS);
      return state;
    } finally {
      pending.delete(read);
      if (pending.size === 0 && reads.get(id) === pending) reads.delete(id);
    }
  }

  function lookUp(id: string): Promise<OrganizationState> {
    let lookup = lookups.get(id);
    if (!lookup) {
      lookup = ask(id)
        .then(
          (state) => cachedState(id) ?? state,
          (err: unknown): OrganizationState | Promise<OrganizationState> => {
            // The database cannot be asked: an organization confirmed within the hour keeps its
            // last known state, as when lookups run out. Not refreshed: the next request asks again.
            if (!isDatabaseUnavailable(err)) throw err;
            const known = confirmed.get(id);
            if (known === undefined) return recall(id, err);
            return known.enabled ? 'enabled' : 'disabled';
          },
        )
        .finally(() => lookups.delete(id));
      lookups.set(id, lookup);
    }
    return lookup;
  }

  /** What a sibling confirmed within the hour, kept here with its age; else `err`. */
  async function recall(id: string, err: unknown): Promise<OrganizationState> {
    const kept = await memory?.recall(id);
    if (kept === undefined) throw err;
    // A change this worker learned meanwhile is newer than the sibling's answer.
    if (cachedState(id) === undefined) {
      const entry = { at: kept.at, enabled: kept.state === 'enabled' };
      confirmed.set(id, entry, kept.at + STALE_MS);
    }
    return cachedState(id) ?? kept.state;
  }

  return {
    stateOf(id, client) {
      const entry = confirmed.get(id);
      if (entry !== undefined && now() - entry.at < FRESH_MS) {
        return entry.enabled ? 'enabled' : 'disabled';
      }
      if (unknown.get(id)) return 'absent';
      if (lookups.has(id) || lookupBudget.take(client)) return lookUp(id);
      // Out of lookups: an organization confirmed before keeps its last known state; one never
      // seen may be real, so it is not called absent.
      const known = cachedState(id);
      if (known !== undefined) return known;
      throw new AppError('databaseUnavailable', { headers: { 'retry-after': '1' } });
    },
    isKnown(id) {
      return confirmed.get(id) !== undefined;
    },
    learn(id, state) {
      for (const read of reads.get(id) ?? []) read.overtaken = true;
      remember(id, state);
      // A deletion is kept as such: no answer asked before it brings the organization back.
      memory?.note(id, state, now(), now() + STALE_MS);
    },
    async reread(id) {
      // Not `lookUp`: a lookup under way was asked before the change, and is overtaken by it.
      try {
        await ask(id, true);
      } catch (err) {
        // The database cannot be asked: the learned state stays, as without a re-read.
        if (!isDatabaseUnavailable(err)) throw err;
      }
    },
  };
}
