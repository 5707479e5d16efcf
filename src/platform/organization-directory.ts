import { TtlLru } from '../cache/ttl-lru.ts';
import type { OrganizationsRepo } from './organizations.repo.ts';

export interface OrganizationDirectory {
  exists(id: string): Promise<boolean>;
  /** True when the organization is known to exist right now, without asking the database. */
  isKnown(id: string): boolean;
}

/**
 * Answers "does this organization exist" for every API request without a database round trip
 * each time: a known organization is remembered for a minute, an unknown one for five seconds
 * (so a newly created organization is usable almost at once on every replica).
 */
export function createOrganizationDirectory(repo: OrganizationsRepo): OrganizationDirectory {
  const known = new TtlLru<boolean>(10_000);
  return {
    isKnown: (id) => known.get(id) === true,
    async exists(id) {
      const cached = known.get(id);
      if (cached !== undefined) return cached;
      const found = (await repo.find(id)) !== undefined;
      known.set(id, found, Date.now() + (found ? 60_000 : 5_000));
      return found;
    },
  };
}
