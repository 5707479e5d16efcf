import type UserRepresentation from '@keycloak/keycloak-admin-client/lib/defs/userRepresentation.js';
import type { KeycloakAdmin } from '../../keycloak/admin-client.ts';
import {
  everyPage,
  isKeycloakNotFound,
  mapFewAtATime,
  someFewAtATime,
} from '../../keycloak/admin-client.ts';
import type { ServiceAdmin } from '../../keycloak/service-admin.ts';
import type { LoginBlock } from '../../auth/account-locks.ts';
import { isWorkspaceId, MASTER_REALM } from '../../tenancy/identifiers.ts';
import { workspacesClientUuidOf } from './provisioning.ts';
import { isClientMissing } from '../../keycloak/realm-gone.ts';

export type KeycloakUser = UserRepresentation & { id: string; username: string };

/** The user whose username is `username` (Keycloak lowercases them, so any case finds it). */
export async function findUserByUsername(
  admin: KeycloakAdmin,
  realm: string,
  username: string,
): Promise<KeycloakUser | undefined> {
  const wanted = username.toLowerCase();
  const found = await admin.users.find({ realm, username, exact: true, briefRepresentation: true });
  // `exact` is Keycloak's promise; the comparison keeps a prefix or a fuzzy match out anyway.
  return found.filter(isComplete).find((user) => user.username === wanted);
}

/**
 * The user name of the one user of `realm` whose e-mail is `email`, as Keycloak finds the
 * account of a login by e-mail (e-mails are stored lowercased); undefined when none has it, or
 * several do (Keycloak then logs none in by it).
 */
export async function usernameOfEmail(
  admin: ServiceAdmin,
  realm: string,
  email: string,
): Promise<string | undefined> {
  const wanted = email.toLowerCase();
  const found = await admin.run(realm, (client) =>
    client.users.find({ realm, email, exact: true, briefRepresentation: true }),
  );
  // `exact` is Keycloak's promise; the comparison keeps a prefix or a fuzzy match out anyway.
  const users = found.filter(isComplete).filter((user) => user.email?.toLowerCase() === wanted);
  return users.length === 1 ? users[0]!.username : undefined;
}

/**
 * What keeps `username` in `realm` from a password login besides its password: an OTP
 * credential (Keycloak's `totp` flag), or Keycloak's temporary brute-force lockout of the
 * enabled user (a permanent one disables the user, which is not this), with its end when
 * Keycloak tells it (`failedLoginNotBefore`, epoch seconds, since Keycloak 26).
 */
export async function loginBlockOf(
  admin: ServiceAdmin,
  realm: string,
  username: string,
): Promise<LoginBlock> {
  return admin.run(realm, async (client) => {
    const [user] = await client.users.find({ realm, username, exact: true });
    if (!user?.id || user.totp === true || user.enabled === false) {
      return { twoFactor: user?.totp === true, lockedOut: false };
    }
    const status = await client.attackDetection.findOne({ realm, id: user.id });
    if (status?.disabled !== true) return { twoFactor: false, lockedOut: false };
    const notBefore: unknown = status.failedLoginNotBefore;
    return typeof notBefore === 'number' && notBefore > 0
      ? { twoFactor: false, lockedOut: true, lockedUntil: notBefore * 1000 }
      : { twoFactor: false, lockedOut: true };
  });
}

/** One page of a realm's users, by username; `search` matches part of username, email or name. */
export async function listUsers(
  admin: KeycloakAdmin,
  realm: string,
  page: { first: number; max: number; search?: string },
): Promise<KeycloakUser[]> {
  const users = await admin.users.find({
    realm,
    first: page.first,
    max: page.max,
    briefRepresentation: true,
    ...(page.search === undefined ? {} : { search: page.search }),
  });
  // Keycloak's store orders by username already; sorting again costs nothing and is a promise.
  return users.filter(isComplete).sort((a, b) => (a.username < b.username ? -1 : 1));
}

/**
 * The workspaces (roles `<ws>` of `<org>-workspaces`) each of `userIds` holds, as its tokens
 * carry them (directly, through a group or a composite role): one admin call
 * per user, `ADMIN_CALLS_AT_ONCE` at a time, plus one for the client. The cost follows the page,
 * whatever the size of the organization.
 */
export async function workspacesOfUsers(
  admin: KeycloakAdmin,
  organizationId: string,
  userIds: readonly string[],
): Promise<Map<string, string[]>> {
  if (userIds.length === 0) return new Map();
  const clientUuid = await workspacesClientUuidOf(admin, organizationId);
  const held = await mapFewAtATime(userIds, async (id) => {
    const roles = await admin.users.listCompositeClientRoleMappings({
      realm: organizationId,
      id,
      clientUniqueId: clientUuid,
    });
    return roles
      .map((role) => role.name ?? '')
      .filter(isWorkspaceId)
      .sort();
  });
  return new Map(userIds.map((id, i) => [id, held[i]!]));
}

/** Adds (`held`) or removes role `<ws>` of `<org>-workspaces`; false when the role is missing. */
export async function setWorkspaceRole(
  admin: KeycloakAdmin,
  organizationId: string,
  userId: string,
  workspaceId: string,
  held: boolean,
): Promise<boolean> {
  const clientUuid = await workspacesClientUuidOf(admin, organizationId);
  const role = await admin.clients.findRole({
    realm: organizationId,
    id: clientUuid,
    roleName: workspaceId,
  });
  if (!role?.id || !role.name) return false;
  const mapping = {
    realm: organizationId,
    id: userId,
    clientUniqueId: clientUuid,
    roles: [{ id: role.id, name: role.name }],
  };
  // Both are idempotent in Keycloak: adding a held role or removing an absent one is a no-op.
  if (held) await admin.users.addClientRoleMappings(mapping);
  else await admin.users.delClientRoleMappings(mapping);
  return true;
}

/**
 * Whether the user holds any of Keycloak's own administration roles, directly, through a group
 * or a composite: realm roles `admin` or `create-realm`, or a role of a realm-administration
 * client (`realm-management` in an organization realm; `master-realm` and `<realm>-realm` in
 * master). For master users this costs up to one call per realm (those clients live in master),
 * `ADMIN_CALLS_AT_ONCE` at a time, none after the first that finds a role.
 */
export async function holdsKeycloakAdminRoles(
  admin: KeycloakAdmin,
  realm: string,
  userId: string,
): Promise<boolean> {
  const realmRoles = await admin.users.listCompositeRealmRoleMappings({ realm, id: userId });
  if (realmRoles.some((role) => role.name === 'admin' || role.name === 'create-realm')) return true;
  const clients =
    realm === MASTER_REALM
      ? (await allClients(admin, realm)).filter((c) => c.clientId?.endsWith('-realm'))
      : await admin.clients.find({ realm, clientId: 'realm-management' });
  return someFewAtATime(clients, async (client) => {
    const roles = await admin.users
      .listCompositeClientRoleMappings({ realm, id: userId, clientUniqueId: client.id ?? '' })
      .catch((err: unknown) => {
        // The client went after the listing (in master, with its realm: an organization deleted
        // meanwhile): no role of it is held any more.
        if (isClientMissing(err)) return [];
        throw err;
      });
    return roles.length > 0;
  });
}

/** Whether the user is a client's service account (those never log in with a password). */
export function isServiceAccount(user: { username: string; serviceAccountClientId?: string }) {
  return user.serviceAccountClientId !== undefined || user.username.startsWith(SERVICE_ACCOUNT);
}

/** Keycloak names every service account `service-account-<clientId>`. */
export const SERVICE_ACCOUNT = 'service-account-';

/**
 * Ends every Keycloak session of the user: online ones (`logout`, which also sets the user's
 * not-before) and offline ones (revoking each client's consent removes its offline sessions).
 */
export async function endSessions(
  admin: KeycloakAdmin,
  realm: string,
  userId: string,
): Promise<void> {
  await admin.users.logout({ realm, id: userId });
  const consents = await admin.users.listConsents({ realm, id: userId });
  for (const consent of consents) {
    if (!consent.clientId) continue;
    await admin.users
      .revokeConsent({ realm, id: userId, clientId: consent.clientId })
      .catch((err: unknown) => {
        if (!isKeycloakNotFound(err)) throw err;
      });
  }
}

/**
 * The longest an access token of the realm can live, in seconds: the realm's lifespan, a
 * client's own `access.token.lifespan` (organization API clients: a day), or the realm's lifespan
 * for the implicit flow, whichever is longest. Keycloak gives a token of the implicit flow the
 * realm's implicit-flow lifespan whatever the client's own (default 900 s, beyond the realm's
 * 300 s); it is counted whether or not a client allows that flow today, since one may have
 * until a moment ago (a refusal kept too long refuses nothing that should be served).
 */
export async function longestAccessTokenSeconds(
  admin: KeycloakAdmin,
  realm: string,
): Promise<number> {
  const [settings, clients] = await Promise.all([
    admin.realms.findOne({ realm }),
    allClients(admin, realm),
  ]);
  const lifespans = clients.map((c) => Number(c.attributes?.['access.token.lifespan'] ?? 0) || 0);
  return Math.max(
    settings?.accessTokenLifespan ?? 300,
    settings?.accessTokenLifespanForImplicitFlow ?? 900,
    ...lifespans,
  );
}

/** Every client of the realm, page by page (master holds one `<realm>-realm` per realm). */
async function allClients(admin: KeycloakAdmin, realm: string) {
  return everyPage(CLIENTS_PAGE, (first, max) => admin.clients.find({ realm, first, max }));
}

const CLIENTS_PAGE = 500;

function isComplete(user: UserRepresentation): user is KeycloakUser {
  return typeof user.id === 'string' && typeof user.username === 'string';
}
