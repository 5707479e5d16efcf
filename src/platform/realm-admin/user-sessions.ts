import type KcAdminClient from '@keycloak/keycloak-admin-client';
import type ClientRepresentation from '@keycloak/keycloak-admin-client/lib/defs/clientRepresentation.js';
import type UserConsentRepresentation from '@keycloak/keycloak-admin-client/lib/defs/userConsentRepresentation.js';
import type UserSessionRepresentation from '@keycloak/keycloak-admin-client/lib/defs/userSessionRepresentation.js';
import { AppError, type ErrorCode } from '../../envelope/errors.ts';
import { httpStatusOf } from '../../keycloak/admin-client.ts';
import type { ServiceAdmin } from '../../keycloak/service-admin.ts';
import { apiClientIdOf } from '../../tenancy/identifiers.ts';

/**
 * Runs an admin-API call; Keycloak refusing it (4xx) becomes `code`. Its failures (503/504/502)
 * come translated from the client layer, a 401 goes to `ServiceAdmin.run`.
 */
export async function adminCall<T>(code: ErrorCode, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    const status = httpStatusOf(err);
    if (status === undefined || status === 401) throw err;
    throw new AppError(code, { cause: err });
  }
}

/**
 * The realm's client `clientId`; undefined when it is gone, unless it is `required` (the API
 * client: one the gateway cannot see is no proof that its sessions ended, nor a list of them).
 */
export async function clientNamed(
  admin: KcAdminClient,
  realm: string,
  clientId: string,
  required: true,
): Promise<KnownClient>;
export async function clientNamed(
  admin: KcAdminClient,
  realm: string,
  clientId: string,
  required: boolean,
): Promise<KnownClient | undefined>;
export async function clientNamed(
  admin: KcAdminClient,
  realm: string,
  clientId: string,
  required: boolean,
): Promise<KnownClient | undefined> {
  const [client] = await adminCall('offlineSessionsUnreadable', () =>
    admin.clients.find({ realm, clientId }),
  );
  if (client?.id) return { ...client, id: client.id };
  if (required) {
    throw new AppError('offlineSessionsUnreadable', { message: 'The API client is missing.' });
  }
  return undefined;
}

/** A client as the admin API answers it, with the id it always has. */
type KnownClient = ClientRepresentation & { id: string };

/** The user's online sessions, of every client. */
export function userSessions(
  serviceAdmin: ServiceAdmin,
  realm: string,
  userId: string,
): Promise<UserSessionRepresentation[]> {
  return serviceAdmin.run(realm, (admin) =>
    adminCall('offlineSessionsUnreadable', () => admin.users.listSessions({ realm, id: userId })),
  );
}

/** The ids of the user's offline sessions of one client (its client id): as `clientNamed`. */
async function offlineSessionIdsOf(
  serviceAdmin: ServiceAdmin,
  realm: string,
  userId: string,
  clientId: string,
  required = false,
): Promise<string[]> {
  const sessions = await serviceAdmin.run(realm, async (admin) => {
    const client = await clientNamed(admin, realm, clientId, required);
    // A client deleted since took its sessions along.
    if (client === undefined) return [];
    const clientUuid = client.id;
    return adminCall('offlineSessionsUnreadable', () =>
      admin.users.listOfflineSessions({ realm, id: userId, clientId: clientUuid }),
    );
  });
  return sessions.map((s) => String(s.id));
}

/**
 * The ids of the user's offline sessions of the realm's other clients than the API client: those
 * the user holds an offline token of (Keycloak's consents name them), when an administrator gave
 * another client the password grant.
 */
export async function otherClientsOfflineSessionIds(
  serviceAdmin: ServiceAdmin,
  realm: string,
  userId: string,
): Promise<string[]> {
  const consents: OfflineConsent[] = await serviceAdmin.run(realm, (admin) =>
    adminCall('offlineSessionsUnreadable', () => admin.users.listConsents({ realm, id: userId })),
  );
  const clientIds = consents
    .filter((consent) => consent.additionalGrants?.some((g) => g.key === OFFLINE_TOKEN_GRANT))
    .map((consent) => consent.clientId)
    .filter((clientId) => clientId !== undefined && clientId !== apiClientIdOf(realm));
  const ids: string[] = [];
  for (const clientId of clientIds) {
    ids.push(...(await offlineSessionIdsOf(serviceAdmin, realm, userId, clientId!)));
  }
  return ids;
}

/**
 * Of the user's sessions `ids`, those Keycloak has ended: in none of its lists (the API client's
 * offline sessions, the user's online sessions, the other clients' offline sessions; a job
 * credential may be any of them), each read only while an id is still unseen. `apiClientOffline`:
 * the API client's offline sessions, when the caller has read them already. Whoever drops what
 * it kept of a session by this must have read it before asking: one opened after Keycloak
 * answered is in no list read.
 */
export async function endedSessionIds(
  serviceAdmin: ServiceAdmin,
  realm: string,
  userId: string,
  ids: readonly string[],
  apiClientOffline?: readonly string[],
): Promise<string[]> {
  const lists: Array<() => Promise<readonly string[]>> = [
    async () =>
      apiClientOffline ??
      offlineSessionIdsOf(serviceAdmin, realm, userId, apiClientIdOf(realm), true),
    async () => (await userSessions(serviceAdmin, realm, userId)).map((s) => String(s.id)),
    () => otherClientsOfflineSessionIds(serviceAdmin, realm, userId),
  ];
  let unseen = [...ids];
  for (const list of lists) {
    if (unseen.length === 0) break;
    const seen = new Set(await list());
    unseen = unseen.filter((id) => !seen.has(id));
  }
  return unseen;
}

/** A consent as Keycloak's admin API answers it, with the client's offline tokens noted. */
type OfflineConsent = UserConsentRepresentation & { additionalGrants?: Array<{ key?: string }> };

/** Keycloak's name, in a consent's `additionalGrants`, for the client's offline tokens. */
const OFFLINE_TOKEN_GRANT = 'Offline Token';
