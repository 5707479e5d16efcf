import type { Principal } from '../tenancy/principal.ts';

/** Builds a principal from verified access-token claims. */
export function principalFromClaims(
  realm: string,
  claims: Record<string, unknown>,
  method: Principal['method'],
): Principal {
  const realmAccess = claims.realm_access as { roles?: unknown } | undefined;
  const resourceAccess = (claims.resource_access ?? {}) as Record<string, { roles?: unknown }>;
  const clientRoles: Record<string, string[]> = {};
  for (const [client, access] of Object.entries(resourceAccess)) {
    clientRoles[client] = stringsOf(access?.roles);
  }
  return {
    realm,
    userId: typeof claims.sub === 'string' ? claims.sub : '',
    username: typeof claims.preferred_username === 'string' ? claims.preferred_username : '',
    realmRoles: stringsOf(realmAccess?.roles),
    clientRoles,
    locale: isLanguageTag(claims.locale) ? claims.locale : undefined,
    method,
    sessionId: typeof claims.sid === 'string' ? claims.sid : undefined,
    clientId: typeof claims.azp === 'string' ? claims.azp : undefined,
    tokenId: typeof claims.jti === 'string' ? claims.jti : undefined,
    boundKey: boundKeyOf(claims),
    issuedAt: Number(claims.iat),
    expiresAt: Number(claims.exp),
  };
}

/**
 * A BCP 47 language tag as Keycloak's locales are written (`ja`, `en`, `pt-BR`, `zh-Hant-TW`).
 * The locale becomes the `Language` header: anything else is dropped for the default.
 */
export function isLanguageTag(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 35 && LANGUAGE_TAG.test(value);
}

const LANGUAGE_TAG = /^[A-Za-z]{2,8}(?:-[A-Za-z0-9]{1,8})*$/;

/**
 * Whether a claim can travel as a header value unchanged: 1 to 255 visible ASCII characters.
 * Keycloak's `sub` is a UUID; a token whose `sub` is not header-safe is refused.
 */
export function isHeaderSafe(value: unknown): value is string {
  return typeof value === 'string' && HEADER_SAFE.test(value);
}

const HEADER_SAFE = /^[\x21-\x7e]{1,255}$/;

/** `cnf.jkt` (RFC 9449 section 6.1), when the token is bound to a key by DPoP. */
export function boundKeyOf(claims: Record<string, unknown>): string | undefined {
  const cnf = claims.cnf as { jkt?: unknown } | undefined;
  return typeof cnf?.jkt === 'string' ? cnf.jkt : undefined;
}

function stringsOf(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}
