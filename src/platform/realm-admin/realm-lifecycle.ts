import { isKeycloakNotFound, type KeycloakAdmin } from '../../keycloak/admin-client.ts';
import { isRealmMissing } from '../../keycloak/realm-gone.ts';
import {
  isOrganizationId,
  isWorkspaceId,
  workspacesClientIdOf,
} from '../../tenancy/identifiers.ts';
import { findWorkspacesClientUuid } from './provisioning.ts';

/**
 * The Keycloak half of ending or suspending what provisioning.ts creates. Each step treats
 * "already gone" as done, so a call that failed half-way can be repeated to completion.
 */

/**
 * Whether the organization's realm exists. Only Keycloak's own answer that it does not
 * (realm-gone.ts) says no: the client's `findOne` reads any 404 as an absent realm, a proxy's
 * too while Keycloak is away behind it, and a record must never be changed or deleted on that.
 * Any other failure is thrown.
 */
export async function realmExists(admin: KeycloakAdmin, organizationId: string): Promise<boolean> {
  try {
    await admin.realms.findOne({ realm: organizationId }, { catchNotFound: false });
    return true;
  } catch (err) {
    if (isRealmMissing(err)) return false;
    throw err;
  }
}

/** Deletes the organization's realm (users, sessions, clients, roles); an absent realm is fine. */
export async function deleteOrganizationRealm(
  admin: KeycloakAdmin,
  organizationId: string,
): Promise<void> {
  requireOrganizationId(organizationId);
  for (let attempt = 1; ; attempt++) {
    try {
      await admin.realms.del({ realm: organizationId });
      return;
    } catch (err) {
      // A concurrent delete (another replica, a retry) leaves Keycloak answering this one 500:
      // the realm being gone is what was asked for. While the twin's removal is still under way
      // the realm is still there; the delete is tried again, then the refusal stands.
      if (isRealmMissing(err) || !(await realmExists(admin, organizationId))) return;
      if (attempt === REALM_DELETE_ATTEMPTS) throw err;
    }
  }
}

/** How many times a refused realm deletion is tried while the realm is still there. */
const REALM_DELETE_ATTEMPTS = 3;

/**
 * Enables or disables the organization's realm: Keycloak then refuses (or allows again) every
 * grant in it. Its users, sessions and refresh tokens are kept, so enabling restores them.
 * Returns false when Keycloak says the realm does not exist (nothing to change).
 */
export async function setOrganizationRealmEnabled(
  admin: KeycloakAdmin,
  organizationId: string,
  enabled: boolean,
): Promise<boolean> {
  requireOrganizationId(organizationId);
  try {
    // A partial representation: Keycloak changes only the fields it carries.
    await admin.realms.update({ realm: organizationId }, { enabled });
    return true;
  } catch (err) {
    if (isRealmMissing(err)) return false;
    throw err;
  }
}

/** A workspace's client roles of `<org>-workspaces`: its members' and its administrators'. */
const workspaceRoleNames = (workspaceId: string) => [workspaceId, `_${workspaceId}-admin`];

/**
 * The workspace's roles as tokens name them (client `<org>-workspaces`): what its deletion takes
 * from whoever holds them, directly, through a group or a composite. None when the client or the
 * realm is gone (the realm's deletion refused its tokens already).
 */
export async function workspaceRolesOf(
  admin: KeycloakAdmin,
  organizationId: string,
  workspaceId: string,
): Promise<{ client: string; name: string }[]> {
  if (!(await workspacesClientOrNothing(admin, organizationId))) return [];
  const client = workspacesClientIdOf(organizationId);
  return workspaceRoleNames(workspaceId).map((name) => ({ client, name }));
}

/**
 * Deletes the workspace's client roles `<ws>` and `_<ws>-admin` of `<org>-workspaces` (users
 * lose them with the roles). Absent roles, client or realm are fine.
 */
export async function deleteWorkspaceRoles(
  admin: KeycloakAdmin,
  organizationId: string,
  workspaceId: string,
): Promise<void> {
  requireOrganizationId(organizationId);
  if (!isWorkspaceId(workspaceId)) {
    throw new Error(`invalid workspace id: ${JSON.stringify(workspaceId)}`);
  }
  const clientUuid = await workspacesClientOrNothing(admin, organizationId);
  if (!clientUuid) return;
  for (const roleName of workspaceRoleNames(workspaceId)) {
    const role = { realm: organizationId, id: clientUuid, roleName };
    try {
      await admin.clients.delRole(role);
    } catch (err) {
      // As for the realm: a concurrent twin's delete makes Keycloak answer this one 500.
      if (isKeycloakNotFound(err)) continue;
      // The client's own reading of a 404 here would take a proxy's for "no such role".
      const left = await admin.clients
        .findRole(role, { catchNotFound: false })
        .catch((recheck: unknown) => {
          if (isKeycloakNotFound(recheck)) return null;
          throw recheck;
        });
      if (left) throw err;
    }
  }
}

/** The id of client `<org>-workspaces`; undefined when it, or the realm, is gone. */
async function workspacesClientOrNothing(
  admin: KeycloakAdmin,
  organizationId: string,
): Promise<string | undefined> {
  try {
    return await findWorkspacesClientUuid(admin, organizationId);
  } catch (err) {
    if (isRealmMissing(err)) return undefined;
    throw err;
  }
}

function requireOrganizationId(organizationId: string): void {
  if (!isOrganizationId(organizationId)) {
    throw new Error(`invalid organization id: ${JSON.stringify(organizationId)}`);
  }
}
