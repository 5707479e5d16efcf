import { decodeJwt } from 'jose';
import type { IdTokenSession } from '../auth/bearer/id-token.ts';
import { isHeaderSafe } from '../auth/principal.ts';

/** The Keycloak session a refresh or offline token names, its user, and its client (`azp`). */
export interface RefreshTokenSession extends IdTokenSession {
  clientId: string | undefined;
}

/**
 * The signed part of a JWS in compact form: its base64url header and payload, up to the dot
 * before the signature. Whatever follows is not read: Keycloak decodes a refresh token's
 * signature leniently (base64 padding and anything after it, the standard alphabet, a line
 * break, dots after it all give the same token; test/integration/job-credentials.test.ts), while
 * its HMAC covers the header and payload exactly as issued. So a token Keycloak accepts always
 * has these two parts as issued, and its claims are read whatever its signature part looks
 * like: a padded copy of a token cannot pass as no token and skip what the gateway checks.
 */
const SIGNED_PART = /^[\w-]+\.[\w-]+\./;

/**
 * The session (`sid`, `sub`) and client (`azp`) a refresh or offline token names, read
 * unverified: it is Keycloak's own HMAC token, so only Keycloak's answer to the request that
 * carries it makes them true. Undefined for any other value. Keycloak names its sessions, users
 * and clients in printable ASCII (`isHeaderSafe`): a claim that is not is no name of Keycloak's,
 * and never reaches a lookup (PostgreSQL refuses a NUL in text: a 500 instead of Keycloak's own
 * refusal of the forged token). One not shaped like a JWT is not
 * given to jose, whose refusal builds an error with its stack: a fifth of the CPU of a refresh
 * grant through the proxy (`bench/ab.ts --route token`).
 */
export function refreshTokenSession(token: string): RefreshTokenSession | undefined {
  const claims = unverifiedClaims(token);
  if (claims === undefined) return undefined;
  const { sid, sub, azp, typ } = claims;
  if (!isHeaderSafe(sid)) return undefined;
  if (typ !== 'Refresh' && typ !== 'Offline') return undefined;
  return {
    sessionId: sid,
    userId: isHeaderSafe(sub) ? sub : undefined,
    clientId: isHeaderSafe(azp) ? azp : undefined,
  };
}

/**
 * The session (`sid`) any token of Keycloak's names (an access token, Bearer or DPoP-bound),
 * read unverified as `refreshTokenSession` reads it; undefined for any other value.
 */
export function tokenSessionId(token: string): string | undefined {
  const sid = unverifiedClaims(token)?.sid;
  return isHeaderSafe(sid) ? sid : undefined;
}

function unverifiedClaims(token: string): ReturnType<typeof decodeJwt> | undefined {
  const signed = SIGNED_PART.exec(token);
  if (signed === null) return undefined;
  try {
    return decodeJwt(signed[0]);
  } catch {
    return undefined;
  }
}
