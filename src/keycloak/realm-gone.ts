import { isHttpStatus } from './admin-client.ts';

/**
 * The one reading of Keycloak's answer that a realm does not exist (an organization's realm
 * deleted in Keycloak's console or admin API while the organization stays in the database): the
 * client's or operator's problem, never an upstream failure. Not any 404: a proxy in front of
 * Keycloak may answer 404 while Keycloak is away, and an outage must not read as a realm gone.
 */

/** What the client is told when an organization's realm is gone (401 `401-00002`). */
export const REALM_GONE_MESSAGE = "The organization's realm does not exist in Keycloak.";

/** Keycloak's `error` for an unknown realm on its OpenID Connect endpoints. */
const OIDC_REALM_GONE = 'Realm does not exist';
/** The same on its admin API. */
const ADMIN_REALM_GONE = 'Realm not found.';
/** The admin API's `error` for a client id the realm does not have (Keycloak 26). */
const ADMIN_CLIENT_GONE = 'Client not found';

/** Whether an OpenID Connect endpoint's answer (token, introspection, certs) says so. */
export function isRealmGone(status: number, body: string): boolean {
  if (status !== 404) return false;
  try {
    return (JSON.parse(body) as { error?: unknown } | null)?.error === OIDC_REALM_GONE;
  } catch {
    return false;
  }
}

/** Whether openid-client's error (its `ResponseBodyError`) carries that answer. */
export function isRealmGoneError(err: unknown): boolean {
  const { status, error } = (err ?? {}) as { status?: unknown; error?: unknown };
  return status === 404 && error === OIDC_REALM_GONE;
}

/**
 * Whether an admin-API client's login (the gateway's service account, in the realm itself) failed
 * because the realm does not exist: its token endpoint's answer, not the admin API's.
 */
export function isRealmGoneLogin(err: unknown): boolean {
  if (!isHttpStatus(err, 404)) return false;
  const data = (err as { responseData?: { error?: unknown } }).responseData;
  return data?.error === OIDC_REALM_GONE;
}

/** Whether an admin-API call failed because the realm it names does not exist. */
export function isRealmMissing(err: unknown): boolean {
  if (!isHttpStatus(err, 404)) return false;
  const data = (err as { responseData?: { error?: unknown } }).responseData;
  return data?.error === ADMIN_REALM_GONE;
}

/**
 * Whether an admin-API call failed because the client it names does not exist in the realm:
 * Keycloak's own answer, not a proxy's 404.
 */
export function isClientMissing(err: unknown): boolean {
  if (!isHttpStatus(err, 404)) return false;
  const data = (err as { responseData?: { error?: unknown } }).responseData;
  return data?.error === ADMIN_CLIENT_GONE;
}
