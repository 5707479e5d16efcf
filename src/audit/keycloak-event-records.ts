import type { AuditEvent } from './audit-writer.ts';
import { UNSET_FIELDS } from './unset-fields.ts';

/**
 * Keycloak's own events of a realm, as its admin API lists them, and the audit records made of
 * them. Only chosen fields are read: an admin event's `representation` (which can carry a
 * client secret or a credential) and its free-form details never reach the log.
 */

/** A user event (`GET /admin/realms/{realm}/events`). */
export interface KeycloakUserEvent {
  id: string;
  time: number;
  type: string;
  clientId?: string;
  userId?: string;
  ipAddress?: string;
  error?: string;
  details?: Record<string, string>;
}

/** An admin event (`GET /admin/realms/{realm}/admin-events`). */
export interface KeycloakAdminEvent {
  id: string;
  time: number;
  operationType: string;
  resourceType?: string;
  resourcePath?: string;
  error?: string;
  authDetails?: { realmId?: string; clientId?: string; userId?: string; ipAddress?: string };
}

/** The two kinds, each with a cursor of its own. */
export const KEYCLOAK_EVENT_KINDS = ['user', 'admin'] as const;
export type KeycloakEventKind = (typeof KEYCLOAK_EVENT_KINDS)[number];

/**
 * The user events a realm saves: sign-ins, sign-outs, credential and account changes, lockouts,
 * consents, impersonation. Not the token refreshes and code exchanges of every session (one per
 * few minutes per user, and the gateway records the grants it proxies); their failures are kept.
 */
export const SAVED_USER_EVENT_TYPES = [
  'LOGIN',
  'LOGIN_ERROR',
  'LOGOUT',
  'LOGOUT_ERROR',
  'CLIENT_LOGIN',
  'CLIENT_LOGIN_ERROR',
  'CODE_TO_TOKEN_ERROR',
  'REFRESH_TOKEN_ERROR',
  'TOKEN_EXCHANGE',
  'TOKEN_EXCHANGE_ERROR',
  'REGISTER',
  'REGISTER_ERROR',
  'UPDATE_PASSWORD',
  'UPDATE_PASSWORD_ERROR',
  'UPDATE_CREDENTIAL',
  'UPDATE_CREDENTIAL_ERROR',
  'REMOVE_CREDENTIAL',
  'REMOVE_CREDENTIAL_ERROR',
  'UPDATE_TOTP',
  'REMOVE_TOTP',
  'RESET_PASSWORD',
  'RESET_PASSWORD_ERROR',
  'SEND_RESET_PASSWORD',
  'UPDATE_EMAIL',
  'UPDATE_PROFILE',
  'DELETE_ACCOUNT',
  'GRANT_CONSENT',
  'REVOKE_GRANT',
  'IMPERSONATE',
  'USER_DISABLED_BY_PERMANENT_LOCKOUT',
  'USER_DISABLED_BY_TEMPORARY_LOCKOUT',
  'USER_SESSION_DELETED',
] as const;

/**
 * Days Keycloak keeps an event: the gateway copies each into its own log within a minute, so
 * Keycloak's copy only has to outlast an outage of the gateway or its database.
 */
export const KEYCLOAK_EVENTS_EXPIRATION_DAYS = 7;

/**
 * What the gateway sets in each realm's events configuration (the rest, such as its listeners,
 * is left as it is). Admin events without their representation: Keycloak then never stores the
 * body of an admin request, secrets included.
 */
export const REALM_EVENTS_SETTINGS = {
  eventsEnabled: true,
  eventsExpiration: KEYCLOAK_EVENTS_EXPIRATION_DAYS * 24 * 3600,
  enabledEventTypes: [...SAVED_USER_EVENT_TYPES],
  adminEventsEnabled: true,
  adminEventsDetailsEnabled: false,
};

/** The details of a user event worth keeping: how, not what was typed. */
const KEPT_USER_DETAILS = ['grant_type', 'auth_method', 'identity_provider'] as const;

/** `LOGIN_ERROR` → `login`, `REALM_ROLE_MAPPING` → `realm-role-mapping`. */
const nameOf = (type: string) =>
  type
    .replace(/_ERROR$/, '')
    .toLowerCase()
    .replace(/_/g, '-');

/** The fields of every record made of a Keycloak event that no Keycloak event fills. */
function recordOf(
  realm: string,
  event: { id: string; time: number; error?: string | undefined },
  fields: Partial<AuditEvent> & Pick<AuditEvent, 'action' | 'details'>,
): AuditEvent {
  return {
    org: realm,
    atMs: event.time,
    outcome: event.error ? 'failure' : 'success',
    ...UNSET_FIELDS,
    reason: event.error ?? null,
    ...fields,
    details: { source: 'keycloak', keycloakEventId: event.id, ...fields.details },
  };
}

/** The record of a user event of `realm`: `keycloak.login`, `keycloak.update-password`... */
export function userEventRecord(realm: string, event: KeycloakUserEvent): AuditEvent {
  const details: Record<string, string> = { keycloakType: event.type };
  for (const name of KEPT_USER_DETAILS) {
    const value = event.details?.[name];
    if (typeof value === 'string') details[name] = value;
  }
  return recordOf(realm, event, {
    action: `keycloak.${nameOf(event.type)}`,
    actorRealm: realm,
    actorId: event.userId ?? null,
    actorName: stringOrNull(event.details?.username),
    clientId: event.clientId ?? null,
    address: event.ipAddress ?? null,
    details,
  });
}

/**
 * The record of an admin event of `realm`: `keycloak.admin.user.create`... The acting realm is
 * named when it is `realm` or one `realmNames` knows (master), else left as Keycloak's id.
 */
export function adminEventRecord(
  realm: string,
  event: KeycloakAdminEvent,
  realmNames: ReadonlyMap<string, string>,
): AuditEvent {
  const auth = event.authDetails ?? {};
  const resource = event.resourceType ?? 'unknown';
  const details: Record<string, string> = {
    keycloakType: `${event.operationType} ${resource}`,
  };
  if (auth.clientId) details.authClient = auth.clientId;
  return recordOf(realm, event, {
    action: `keycloak.admin.${nameOf(resource)}.${nameOf(event.operationType)}`,
    actorRealm: auth.realmId ? (realmNames.get(auth.realmId) ?? auth.realmId) : null,
    actorId: auth.userId ?? null,
    address: auth.ipAddress ?? null,
    path: event.resourcePath ?? null,
    details,
  });
}

function stringOrNull(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}
