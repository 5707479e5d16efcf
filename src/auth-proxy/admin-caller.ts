import type { IncomingMessage } from 'node:http';
import { compactVerify, decodeProtectedHeader, errors as joseErrors } from 'jose';
import { ALLOWED_ALGORITHMS, isAccessToken } from '../auth/bearer/bearer-verifier.ts';
import type { JwksRegistry } from '../auth/bearer/jwks.ts';

/**
 * Whether Keycloak's admin API might admit a request to change `realm`: a word of its
 * `Authorization` headers is an access token (bearer-verifier.ts `isAccessToken`) whose
 * signature a key of `realm` or of master verifies (Keycloak admits a realm's administrators
 * from those two realms only, and only with such a token). The admin listener's endings (end-access.ts) read Keycloak
 * before forwarding a change; without this, anyone reaching the listener could have the gateway
 * make those reads for a request Keycloak then refuses, as many as its body names.
 *
 * It errs towards true, since a change Keycloak makes must never go un-ended: neither the issuer
 * is checked (a token got through the admin listener names that listener's address) nor expiry
 * (the gateway's clock may be ahead of Keycloak's, by any amount), a token signed with a realm's
 * HMAC key (which Keycloak verifies and the gateway cannot) counts, and so does a key set that
 * cannot be fetched. False only when no word is such a token: malformed, of another kind, or
 * signed by no key either realm publishes now (jwks.ts fetches the set again for a key it does
 * not know).
 */
export function createAdminCallerCheck(jwks: Pick<JwksRegistry, 'keySetFor'>) {
  async function mayBeAdmitted(realm: string, token: string, client?: string): Promise<boolean> {
    let alg: string | undefined;
    try {
      alg = decodeProtectedHeader(token).alg;
    } catch {
      return false; // no JWS at all
    }
    if (alg?.startsWith('HS')) return true;
    let payload: Uint8Array;
    try {
      ({ payload } = await compactVerify(token, jwks.keySetFor(realm, client), {
        algorithms: ALLOWED_ALGORITHMS,
      }));
    } catch (err) {
      // jose's refusals say the token is not the realm's; anything else (a key set that could
      // not be fetched, or not read) tells nothing.
      return (
        !(err instanceof joseErrors.JOSEError) ||
        err instanceof joseErrors.JWKSInvalid ||
        err instanceof joseErrors.JWKSTimeout
      );
    }
    const claims = claimsOf(payload);
    return claims !== undefined && isAccessToken(claims);
  }

  return async (req: IncomingMessage, realm: string, client?: string): Promise<boolean> => {
    // Keycloak reads one `Bearer <token>`: a request of more words gets no more checks.
    for (const token of authorizationWords(req).slice(0, MAX_WORDS)) {
      if (await mayBeAdmitted(realm, token, client)) return true;
      if (realm !== 'master' && (await mayBeAdmitted('master', token, client))) return true;
    }
    return false;
  };
}

function claimsOf(payload: Uint8Array): Record<string, unknown> | undefined {
  try {
    const claims: unknown = JSON.parse(new TextDecoder().decode(payload));
    return typeof claims === 'object' && claims !== null && !Array.isArray(claims)
      ? (claims as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

const MAX_WORDS = 4;

export type AdminCallerCheck = ReturnType<typeof createAdminCallerCheck>;

/** Every word of every `Authorization` header but its scheme's, however spelt or listed. */
function authorizationWords(req: IncomingMessage): string[] {
  const words: string[] = [];
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== 'authorization') continue;
    for (const word of raw[i + 1]!.split(/[\s,]+/)) {
      const lower = word.toLowerCase();
      if (word !== '' && lower !== 'bearer' && lower !== 'dpop') words.push(word);
    }
  }
  return words;
}
