import type { OrganizationLookup } from '../auth/admission.ts';
import { TtlLru } from '../cache/ttl-lru.ts';
import type { OrganizationsRepo } from './organizations.repo.ts';

/** How long a confirmed organization is trusted before the database is asked again. */
const FRESH_MS = 60_000;
/** How long an organization confirmed once is still served while the database cannot be asked. */
const STALE_MS = 60 * 60_000;
/** How long an unknown id answers 404 without the database (a new organization waits this long). */
const UNKNOWN_MS = 5_000;
/** Database lookups per second (and burst) for ids in neither cache, per replica. */
const LOOKUPS_PER_SECOND = 50;
const MAX_ENTRIES = 10_000;

/**
 * Answers "does this organization exist" for every API request without a database round trip
 * each time. Real organizations and unknown ids live in separate bounded caches, so a flood of
 * random ids can never evict a real organization; and ids in neither cache reach the database
 * at most `LOOKUPS_PER_SECOND` times a second. Past that rate, an organization confirmed before
 * is still served (for up to an hour), and an id never seen answers "no" until the rate allows
 * a lookup.
 */
export function createOrganizationDirectory(
  repo: Pick<OrganizationsRepo, 'find'>,
  now: () => number = Date.now,
): OrganizationLookup {
  /** Real organizations, with the time each was last confirmed. */
  const confirmed = new TtlLru<number>(MAX_ENTRIES, now);
  const unknown = new TtlLru<true>(MAX_ENTRIES, now);
  const lookups = new Map<string, Promise<boolean>>();
  const budget = createTokenBucket(LOOKUPS_PER_SECOND, now);

  function lookUp(id: string): Promise<boolean> {
    let lookup = lookups.get(id);
    if (!lookup) {
      lookup = repo
        .find(id)
        .then((found) => {
          if (found) {
            confirmed.set(id, now(), now() + STALE_MS);
          } else {
            confirmed.delete(id);
            unknown.set(id, true, now() + UNKNOWN_MS);
          }
          return found !== undefined;
        })
        .finally(() => lookups.delete(id));
      lookups.set(id, lookup);
    }
    return lookup;
  }

  return {
    isKnown(id) {
      const confirmedAt = confirmed.get(id);
      return confirmedAt !== undefined && now() - confirmedAt < FRESH_MS;
    },
    async exists(id) {
      const confirmedAt = confirmed.get(id);
      if (confirmedAt !== undefined && now() - confirmedAt < FRESH_MS) return true;
      if (unknown.get(id)) return false;
      if (lookups.has(id) || budget.take()) return lookUp(id);
      return confirmedAt !== undefined;
    },
  };
}

/** A token bucket: `take()` succeeds at most `perSecond` times a second, with that as burst. */
function createTokenBucket(perSecond: number, now: () => number) {
  let tokens = perSecond;
  let last = now();
  return {
    take(): boolean {
      const at = now();
      tokens = Math.min(perSecond, tokens + ((at - last) * perSecond) / 1000);
      last = at;
      if (tokens < 1) return false;
      tokens -= 1;
      return true;
    },
  };
}
