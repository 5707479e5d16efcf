import { MASTER_REALM } from '../tenancy/identifiers.ts';
import type { OrganizationLookup } from '../tenancy/organization-state.ts';

/** Whether `realm` has a log of its own; rejects when that could not be looked up. */
export type RealmLogCheck = (realm: string, client?: string) => Promise<boolean>;

/**
 * The one rule of which realms have a log: master, and each organization that exists (a
 * disabled one too), as the directory knows them. A record about a realm a client named (a
 * token grant, an `/auth` refusal, a throttle that started: token-grants.ts, auth-refusals.ts,
 * change-events.ts) goes to that realm's log only when it has one, else to master's, naming it
 * (bounded) in `details.realm`, and so does one whose realm could not be looked up: anyone can
 * name a realm, and that must not make a log. A lookup it needs is charged to `client`'s share
 * of the directory's (a flood of records naming made-up realms spends its sender's, not what is
 * kept for others).
 */
export function realmLogCheck(directory: Pick<OrganizationLookup, 'stateOf'>): RealmLogCheck {
  return async (realm, client) =>
    realm === MASTER_REALM || (await directory.stateOf(realm, client)) !== 'absent';
}
