import type { JwksRegistry } from './jwks.ts';
import { realmSignedClaims } from './session-token.ts';

/** The Keycloak session an ID token names, and its user. */
export interface IdTokenSession {
  sessionId: string;
  userId: string | undefined;
}

/**
 * Reads an ID token (an OIDC logout's `id_token_hint`) the way the Bearer verifier reads access
 * tokens: signed by a key of the realm's key set, with an allowed algorithm, issued by the
 * realm as `PUBLIC_URL` names it, `typ: ID`. Expiry does not matter: Keycloak accepts an
 * expired hint, and the session it names is what the logout ended. Undefined for anything else
 * (a forged or foreign token, a token without `sid`, a key set that cannot be fetched, a realm
 * the gateway does not serve). `client`: the sender's address (jwks.ts, `keySetFor`).
 */
export function createIdTokenReader(options: { jwks: JwksRegistry; publicUrl: string }) {
  return async (
    realm: string,
    token: string,
    client?: string,
  ): Promise<IdTokenSession | undefined> => {
    const payload = await realmSignedClaims(options.jwks, options.publicUrl, realm, token, client);
    if (payload?.typ !== 'ID' || typeof payload.sid !== 'string' || payload.sid === '') {
      return undefined;
    }
    return {
      sessionId: payload.sid,
      userId: typeof payload.sub === 'string' ? payload.sub : undefined,
    };
  };
}

export type IdTokenReader = ReturnType<typeof createIdTokenReader>;
