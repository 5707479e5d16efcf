import { decodeJwt } from 'jose';
import type { IdTokenSession } from '../auth/bearer/id-token.ts';

/** The Keycloak session a refresh or offline token names, its user, and its client (`azp`). */
export interface RefreshTokenSession extends IdTokenSession {
  clientId: string | undefined;
}

/** A JWS in compact form: three base64url parts (the signature may be empty). */
const COMPACT_JWS = /^[\w-]+\.[\w-]+\.[\w-]*$/;

/**
 * The session (`sid`, `sub`) and client (`azp`) a refresh or offline token names, read
 * unverified: it is Keycloak's own HMAC token, so only Keycloak's answer to the request that
 * carries it makes them true. Undefined for any other value. One not shaped like a JWT is not
 * given to jose, whose refusal builds an error with its stack: a fifth of the CPU of a refresh
 * grant through the proxy (`bench/ab.ts --route token`).
 */
export function refreshTokenSession(token: string): RefreshTokenSession | undefined {
  if (!COMPACT_JWS.test(token)) return undefined;
  try {
    const { sid, sub, azp, typ } = decodeJwt(token);
    if (typeof sid !== 'string' || sid === '') return undefined;
    if (typ !== 'Refresh' && typ !== 'Offline') return undefined;
    return {
      sessionId: sid,
      userId: typeof sub === 'string' ? sub : undefined,
      clientId: typeof azp === 'string' && azp !== '' ? azp : undefined,
    };
  } catch {
    return undefined;
  }
}
