import { decodeJwt, errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';
import { isOrganizationId, MASTER_REALM, realmIssuer } from '../../tenancy/identifiers.ts';
import { isHeaderSafe } from '../principal.ts';
import { ALLOWED_ALGORITHMS, isAccessToken } from './bearer-verifier.ts';
import type { JwksRegistry } from './jwks.ts';

/**
 * The claims of `token` if `realm` signed it: a key of the realm's key set, an allowed
 * algorithm, the realm as `PUBLIC_URL` names it for issuer. Expiry does not matter to its
 * callers (a token past its lifetime still names its session), so an expired token's claims are
 * given too; undefined for anything else (forged, foreign, Keycloak's own HMAC tokens, a key set
 * that cannot be fetched). `client`: the sender's address (jwks.ts, `keySetFor`).
 */
export async function realmSignedClaims(
  jwks: Pick<JwksRegistry, 'keySetFor'>,
  publicUrl: string,
  realm: string,
  token: string,
  client?: string,
): Promise<JWTPayload | undefined> {
  try {
    const { payload } = await jwtVerify(token, jwks.keySetFor(realm, client), {
      issuer: realmIssuer(publicUrl, realm),
      algorithms: ALLOWED_ALGORITHMS,
    });
    return payload;
  } catch (err) {
    // Thrown after the signature and issuer were checked (jose checks the times last).
    return err instanceof joseErrors.JWTExpired ? err.payload : undefined;
  }
}

/**
 * Whether `token` is an access token `realm` issued in the session `sessionId`
 * (`realmSignedClaims`, an access token as the Bearer verifier takes one, its `sid` that
 * session): what a request to Keycloak carries where the reach step reads a token. Whether it was
 * a token of the session is what matters, not whether it is still good. False for anything else:
 * a forged token naming a session whose id its sender learnt, a realm the gateway does not serve,
 * the session's ID token (which travels where its access token does not: a logout URL's query).
 */
export function createSessionTokenCheck(options: {
  jwks: Pick<JwksRegistry, 'keySetFor'>;
  publicUrl: string;
}) {
  return async (
    realm: string,
    sessionId: string,
    token: string,
    client?: string,
  ): Promise<boolean> => {
    const claims = await realmSignedClaims(options.jwks, options.publicUrl, realm, token, client);
    return claims !== undefined && isAccessToken(claims) && claims.sid === sessionId;
  };
}

export type SessionTokenCheck = ReturnType<typeof createSessionTokenCheck>;

/** The realm and session of an access token a realm signed (`createSignedSessionReader`). */
export interface SignedSession {
  realm: string;
  sessionId: string;
}

/**
 * Reads the session of an access token a realm the gateway serves signed, as
 * `createSessionTokenCheck` checks one, its realm read from its `iss` (exactly
 * `PUBLIC_URL/auth/realms/<realm>`, master or an organization's id, as the logout token's):
 * undefined for anything that is not one (forged, foreign, another kind of token, a realm the
 * gateway does not serve, a key no key set has). Rejects when it cannot tell: the realm's key set
 * cannot be fetched, or whether the realm is served cannot be looked up now (the sender's
 * lookups spent). Past its lifetime a token still names its session, so its session is given.
 * `client`: the sender's address (jwks.ts, `keySetFor`).
 */
export function createSignedSessionReader(options: {
  jwks: Pick<JwksRegistry, 'keySetFor'>;
  publicUrl: string;
}) {
  const prefix = realmIssuer(options.publicUrl, '');
  return async (token: string, client?: string): Promise<SignedSession | undefined> => {
    let issuer: unknown;
    try {
      issuer = decodeJwt(token).iss;
    } catch {
      return undefined;
    }
    const realm =
      typeof issuer === 'string' && issuer.startsWith(prefix) && issuer.slice(prefix.length);
    if (!realm || (realm !== MASTER_REALM && !isOrganizationId(realm))) return undefined;
    let claims: JWTPayload;
    try {
      ({ payload: claims } = await jwtVerify(token, options.jwks.keySetFor(realm, client), {
        issuer: realmIssuer(options.publicUrl, realm),
        algorithms: ALLOWED_ALGORITHMS,
      }));
    } catch (err) {
      // jose's own refusals say the token is none the realm signed; any other failure (a key
      // set or a lookup that could not be had) says nothing of it.
      if (err instanceof joseErrors.JWTExpired) claims = err.payload;
      else if (err instanceof joseErrors.JOSEError) return undefined;
      else throw err;
    }
    if (!isAccessToken(claims) || !isHeaderSafe(claims.sid)) return undefined;
    return { realm, sessionId: claims.sid };
  };
}

export type SignedSessionReader = ReturnType<typeof createSignedSessionReader>;
