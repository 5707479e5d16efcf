import type { JwksRegistry } from '../auth/bearer/jwks.ts';
import type { KeySetEvents } from '../auth/bearer/key-set-events.ts';
import { AppError } from '../envelope/errors.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import type { OrganizationsRepo } from './organizations.repo.ts';

/** A realm's signing keys as this replica verifies with them after a refresh. */
export interface SigningKeySet {
  realm: string;
  key_ids: string[];
}

export interface SigningKeysService {
  /**
   * Fetches `realm`'s key set now on every replica, and answers the `kid`s this one holds once
   * its own fetch is over: a key removed in Keycloak no longer verifies here, tokens already
   * seen included. A failed fetch keeps the last good set and answers its 503/504/502; a realm
   * Keycloak says it does not have answers 404 `404-00001`, as the other calls that need it do.
   */
  refreshSigningKeys(realm: string): Promise<SigningKeySet>;
}

export function createSigningKeysService(deps: {
  events: KeySetEvents;
  jwks: Pick<JwksRegistry, 'lastFailure' | 'kidsOf' | 'isGone'>;
  organizations: Pick<OrganizationsRepo, 'find'>;
}): SigningKeysService {
  return {
    async refreshSigningKeys(realm) {
      if (realm !== MASTER_REALM && !(await deps.organizations.find(realm))) {
        throw new AppError('organizationNotFound');
      }
      await deps.events.refreshEverywhere(realm);
      const failure = deps.jwks.lastFailure(realm);
      if (failure) throw failure;
      // Deleted in Keycloak while the record stays: not a set without keys.
      if (deps.jwks.isGone(realm)) throw new AppError('organizationNotFound');
      return { realm, key_ids: deps.jwks.kidsOf(realm) };
    },
  };
}
