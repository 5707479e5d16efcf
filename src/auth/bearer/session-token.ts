import { errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';
import { realmIssuer } from '../../tenancy/identifiers.ts';
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
