import type { IncomingMessage } from 'node:http';
import { compactVerify, errors as joseErrors } from 'jose';
import { ALLOWED_ALGORITHMS } from '../auth/bearer/bearer-verifier.ts';
import type { JwksRegistry } from '../auth/bearer/jwks.ts';

/**
 * Whether Keycloak's admin API might admit a request to change `realm`: a word of its
 * `Authorization` headers is a token whose signature a key of `realm` or of master verifies
 * (Keycloak admits a realm's administrators from those two realms only, and only with such a
 * token). The admin listener's endings (end-access.ts) read Keycloak before forwarding a change;
 * without this, anyone reaching the listener could have the gateway make those reads for a
 * request Keycloak then refuses, as many as its body names.
 *
 * It errs towards true, since a change Keycloak makes must never go un-ended: the issuer is not
 * checked (a token got through the admin listener names that listener's address), nor expiry
 * (the gateway's clock may be behind Keycloak's), and a key set that cannot be fetched tells
 * nothing. False only when no word is a token, or each is signed by no key either realm
 * publishes now (jwks.ts fetches the set again for a key it does not know).
 */
export function createAdminCallerCheck(jwks: Pick<JwksRegistry, 'keySetFor'>) {
  async function signedBy(realm: string, token: string, client?: string): Promise<boolean> {
    try {
      await compactVerify(token, jwks.keySetFor(realm, client), {
        algorithms: ALLOWED_ALGORITHMS,
      });
      return true;
    } catch (err) {
      return !(
        err instanceof joseErrors.JWSInvalid ||
        err instanceof joseErrors.JWSSignatureVerificationFailed ||
        // A key neither set has; a realm the gateway does not serve or Keycloak no longer has.
        err instanceof joseErrors.JWKSNoMatchingKey ||
        // Keycloak signs the realm's tokens with a key pair; a token of another kind is none.
        err instanceof joseErrors.JOSEAlgNotAllowed
      );
    }
  }

  return async (req: IncomingMessage, realm: string, client?: string): Promise<boolean> => {
    // Keycloak reads one `Bearer <token>`: a request of more words gets no more checks.
    for (const token of authorizationWords(req).slice(0, MAX_WORDS)) {
      if (await signedBy(realm, token, client)) return true;
      if (realm !== 'master' && (await signedBy('master', token, client))) return true;
    }
    return false;
  };
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
