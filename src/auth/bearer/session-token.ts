import { errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';
import { realmIssuer } from '../../tenancy/identifiers.ts';
import { ALLOWED_ALGORITHMS } from './bearer-verifier.ts';
import type { JwksRegistry } from './jwks.ts';

/**
 * Whether `token` is one `realm` issued in the session `sessionId`: signed by a key of the
 * realm's key set with an allowed algorithm, issued by the realm as `PUBLIC_URL` names it, its
 * `sid` that session. Whether it was a token of the session is what matters, not whether it is
 * still good: expiry does not (a token past its lifetime is still its session's). False for
 * anything else: a forged token naming a session whose id its sender learnt, Keycloak's own
 * HMAC tokens (no key of the gateway's verifies them), a key set that cannot be fetched, a
 * realm the gateway does not serve. `client`: the sender's address (jwks.ts, `keySetFor`).
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
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, options.jwks.keySetFor(realm, client), {
        issuer: realmIssuer(options.publicUrl, realm),
        algorithms: ALLOWED_ALGORITHMS,
      }));
    } catch (err) {
      // Thrown after the signature and issuer were checked (jose checks the times last).
      if (!(err instanceof joseErrors.JWTExpired)) return false;
      payload = err.payload;
    }
    return payload.sid === sessionId;
  };
}

export type SessionTokenCheck = ReturnType<typeof createSessionTokenCheck>;
