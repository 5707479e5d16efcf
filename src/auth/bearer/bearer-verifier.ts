import { hash } from 'node:crypto';
import { decodeJwt, errors as joseErrors, jwtVerify } from 'jose';
import { AppError } from '../../envelope/errors.ts';
import { keycloakError } from '../../keycloak/keycloak-failures.ts';
import { REALM_GONE_MESSAGE } from '../../keycloak/realm-gone.ts';
import { TtlLru } from '../../cache/ttl-lru.ts';
import type { AuthMetrics } from '../auth-metrics.ts';
import { AuthFailure } from '../auth-failure.ts';
import { boundKeyOf, isHeaderSafe, principalFromClaims } from '../principal.ts';
import type { Principal } from '../../tenancy/principal.ts';
import { RealmGone, type JwksRegistry } from './jwks.ts';
import type { RevocationList } from '../revocation.ts';
import { systemClock, type Clock } from '../../time/clock.ts';
import type { Answer } from '../answer.ts';
import { realmIssuer } from '../../tenancy/identifiers.ts';
import { ASYMMETRIC_ALGORITHMS } from '../../config/jws-algorithms.ts';

/** Asymmetric algorithms only: `none` and HMAC (which a public key could "sign") never pass. */
export const ALLOWED_ALGORITHMS: string[] = [...ASYMMETRIC_ALGORITHMS];

/** Far above any Keycloak access token; the request head is capped at 16 KiB anyway. */
const MAX_TOKEN_LENGTH = 12 * 1024;

/** RFC 6750 token68 syntax. */
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;

export interface BearerVerifier {
  /**
   * Verifies an access token for `realm`: its principal at once when the token was verified
   * before and its key is still published, else a promise. Throws (or rejects with)
   * AuthFailure, or AppError when Keycloak is unreachable. `tokenHash`: the token's SHA-256
   * (base64url), when the caller has it (the DPoP scheme: a proof's `ath` is the same hash).
   * `client`: the sender's address, where no admission confirmed the realm before (jwks.ts,
   * `keySetFor`).
   */
  verify(realm: string, token: string, tokenHash?: string, client?: string): Answer<Principal>;
}

/** A verified token as remembered: whom it names, and the key that signed it. */
interface Verified {
  principal: Principal;
  kid: string;
}

/**
 * Verifies access tokens locally against the realm's JWKS. A verified token is remembered,
 * keyed by its SHA-256 (never the token itself), until it expires, so a repeated token costs
 * one hash and one lookup of its `kid` in the realm's current key set instead of a signature
 * check, and no promise; once the set no longer has that key (removed in Keycloak), the token
 * is verified again, and refused.
 */
export function createBearerVerifier(options: {
  jwks: JwksRegistry;
  publicUrl: string;
  leewaySeconds: number;
  maxCachedTokens: number;
  /**
   * Told each newly verified token's lifetime: a revocation of its realm's tokens lasts as long
   * as the longest-lived token still served (revocation.ts).
   */
  lifetimes: Pick<RevocationList, 'noteServedLifetime'>;
  metrics: Pick<AuthMetrics, 'cacheLookup'>;
  clock?: Clock;
}): BearerVerifier {
  const { clock = systemClock } = options;
  const verified = new TtlLru<Verified>(options.maxCachedTokens, clock);
  const issuerOf = (realm: string) => realmIssuer(options.publicUrl, realm);
  const stillSigned = (known: Verified) => options.jwks.publishes(known.principal.realm, known.kid);

  return {
    verify(realm, token, tokenHash, client) {
      const key = tokenHash ?? tokenHashOf(token);
      const known = verified.get(key);
      options.metrics.cacheLookup('verified_token', known !== undefined);
      if (known) {
        if (known.principal.realm !== realm)
          throw new AuthFailure('bearer', 'wrong_realm', 'Token was not issued for this realm.');
        if (stillSigned(known)) return known.principal;
        // Its key left the set held now (or the realm's set was dropped): verify it again.
        verified.delete(key);
      }
      // Only verified tokens are remembered, so a token found above is well-formed.
      if (token.length > MAX_TOKEN_LENGTH || !TOKEN68.test(token)) {
        throw new AuthFailure('bearer', 'bad_token', 'Malformed token.');
      }
      // Reject another realm's token before touching any key set: no refetch for a foreign kid.
      let unverified: Record<string, unknown>;
      try {
        unverified = decodeJwt(token);
      } catch (err) {
        throw new AuthFailure('bearer', 'bad_token', 'Malformed token.', { cause: err });
      }
      if (unverified.iss !== issuerOf(realm)) {
        throw new AuthFailure('bearer', 'wrong_realm', 'Token was not issued for this realm.');
      }
      return verifySignatureAndClaims(token, realm, client).then(({ claims, kid }) => {
        // The same principal object as before a re-verification: its re-check state stays.
        const principal = known?.principal ?? principalFromClaims(realm, claims, 'bearer');
        verified.set(key, { principal, kid }, principal.expiresAt * 1000);
        const servedUntil = principal.expiresAt + options.leewaySeconds;
        options.lifetimes.noteServedLifetime(
          realm,
          servedUntil - principal.issuedAt,
          servedUntil * 1000,
        );
        return principal;
      });
    },
  };

  async function verifySignatureAndClaims(
    token: string,
    realm: string,
    client: string | undefined,
  ): Promise<{ claims: Record<string, unknown>; kid: string }> {
    try {
      const { payload, protectedHeader } = await jwtVerify(
        token,
        options.jwks.keySetFor(realm, client),
        {
          issuer: issuerOf(realm),
          algorithms: ALLOWED_ALGORITHMS,
          clockTolerance: options.leewaySeconds,
          currentDate: new Date(clock.now()),
          requiredClaims: ['exp', 'iat', 'sub'],
        },
      );
      if (!isAccessToken(payload))
        throw new AuthFailure('bearer', 'bad_token', 'Not an access token.');
      // `sub` becomes the upstream's `User-Id` header: it must be sendable as it is.
      if (!isHeaderSafe(payload.sub))
        throw new AuthFailure('bearer', 'bad_token', 'Token claim "sub" is not valid.');
      if (Number(payload.iat) > clock.now() / 1000 + options.leewaySeconds) {
        throw new AuthFailure('bearer', 'bad_token', 'Token issued in the future.');
      }
      // The key set selects by `kid` and refuses a token without one, so it is there.
      return { claims: payload, kid: String(protectedHeader.kid) };
    } catch (err) {
      throw translateJoseError(err);
    }
  }
}

/** The SHA-256 of an access token, base64url: the verified tokens' key, and a DPoP proof's `ath`. */
export function tokenHashOf(token: string): string {
  return hash('sha256', token, 'base64url');
}

/**
 * An access token: `typ` `Bearer`, or `DPoP` for one bound to a key (Keycloak names a bound
 * token so). A token confirmed otherwise than by a DPoP key (`cnf` with `x5t#S256`, mutual TLS)
 * is refused: the gateway cannot check that binding, and would serve it as a bearer token.
 */
export function isAccessToken(claims: Record<string, unknown>): boolean {
  if (claims.cnf === undefined) return claims.typ === 'Bearer';
  const bound = boundKeyOf(claims) !== undefined;
  return bound && (claims.typ === 'Bearer' || claims.typ === 'DPoP');
}

function translateJoseError(err: unknown): Error {
  if (err instanceof AuthFailure) return err;
  if (err instanceof joseErrors.JWTExpired)
    return new AuthFailure('bearer', 'expired', 'Token expired.', { cause: err });
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    return new AuthFailure('bearer', 'bad_token', `Token claim "${err.claim}" is not valid.`, {
      cause: err,
    });
  }
  if (err instanceof joseErrors.JOSEAlgNotAllowed) {
    return new AuthFailure('bearer', 'bad_token', 'Token algorithm is not allowed.', {
      cause: err,
    });
  }
  if (err instanceof joseErrors.JWSSignatureVerificationFailed) {
    return new AuthFailure('bearer', 'bad_token', 'Token signature is not valid.', { cause: err });
  }
  if (err instanceof RealmGone) {
    return new AuthFailure('bearer', 'realm_gone', REALM_GONE_MESSAGE, { cause: err });
  }
  if (
    err instanceof joseErrors.JWKSNoMatchingKey ||
    err instanceof joseErrors.JWKSMultipleMatchingKeys
  ) {
    return new AuthFailure('bearer', 'bad_token', 'Token was signed with an unknown key.', {
      cause: err,
    });
  }
  // Fetching the key set failed: the client layer has already translated it (503/504/502).
  if (err instanceof AppError) return err;
  // Keycloak's key set parsed as JSON but holds no usable keys.
  if (err instanceof joseErrors.JWKSInvalid) return keycloakError('bad_answer', err);
  if (err instanceof joseErrors.JOSEError) {
    return new AuthFailure('bearer', 'bad_token', 'Malformed token.', { cause: err });
  }
  return new AppError('unexpected', { cause: err });
}
