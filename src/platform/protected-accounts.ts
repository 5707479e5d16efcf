import type { Principal } from '../tenancy/principal.ts';
import { AppError } from '../envelope/errors.ts';
import type { KeycloakAdmin } from '../keycloak/admin-client.ts';
import { isBootstrapAdmin } from '../auth/bootstrap-admin.ts';
import {
  findUserByUsername,
  holdsKeycloakAdminRoles,
  isServiceAccount,
  type KeycloakUser,
} from './realm-admin/users.ts';

/** What the lifecycle API can do to a user. */
export type UserChange = 'disable' | 'enable' | 'delete' | 'password' | 'workspace';

/** Changes that would lock the caller out are refused on the caller's own account. */
const LOCK_OUT: ReadonlySet<UserChange> = new Set(['disable', 'delete']);

/** The user named `username`, or 404 `404-00003`. */
export async function requireUser(
  admin: KeycloakAdmin,
  realm: string,
  username: string,
): Promise<KeycloakUser> {
  const user = await findUserByUsername(admin, realm, username);
  if (!user) throw new AppError('userNotFound');
  return user;
}

/**
 * The one protection check of every change the lifecycle API makes: Keycloak's bootstrap
 * administrator, service accounts and holders of Keycloak's administration roles are never
 * changed, nor is the caller's own account disabled or deleted; each is 403 `403-00002`. Names
 * alone refuse first, so a service account that Keycloak's user search leaves out is refused
 * rather than "not found". Resolves to the user the change may apply to.
 */
export function createChangeableUserLookup(bootstrapAdmin: string) {
  return async function changeableUser(
    admin: KeycloakAdmin,
    realm: string,
    username: string,
    change: UserChange,
    caller: Principal,
  ): Promise<KeycloakUser> {
    const refused = () => new AppError('protectedAccount');
    const named = { username: username.toLowerCase() };
    if (isBootstrapAdmin(bootstrapAdmin, realm, username) || isServiceAccount(named)) {
      throw refused();
    }
    const user = await requireUser(admin, realm, username);
    if (isBootstrapAdmin(bootstrapAdmin, realm, user.username) || isServiceAccount(user)) {
      throw refused();
    }
    if (LOCK_OUT.has(change) && caller.realm === realm && caller.userId === user.id) {
      throw refused();
    }
    if (await holdsKeycloakAdminRoles(admin, realm, user.id)) throw refused();
    return user;
  };
}
