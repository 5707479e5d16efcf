import {
  decodeJwt,
  decodeProtectedHeader,
  errors as joseErrors,
  jwtVerify,
  type JWTPayload,
} from 'jose';
import { AppError } from '../../envelope/errors.ts';
import { isOrganizationId, MASTER_REALM, realmIssuer } from '../../tenancy/identifiers.ts';
import { systemClock, type Clock } from '../../time/clock.ts';
import { isHeaderSafe } from '../principal.ts';
import { ALLOWED_ALGORITHMS } from './bearer-verifier.ts';
import { RealmNotServed, type JwksRegistry } from './jwks.ts';

/** OpenID Connect Back-Channel Logout 1.0, 2.4: the member of `events` a logout token has. */
export const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

/**
 * Why a logout token is refused (section 2.6's checks, in its order), a closed list: the
 * metrics' label values and the audit lines are these.
 */
export const LOGOUT_TOKEN_FAULTS = [
  'malformed',
  'unknown_issuer',
  'bad_signature',
  'key_set_unavailable',
  'wrong_audience',
  'stale',
  'no_event',
  'no_subject',
  'nonce',
] as const;

export type LogoutTokenFault = (typeof LOGOUT_TOKEN_FAULTS)[number];

/** What a valid logout token names: a session (`sid`), a user (`sub`), or both. */
export interface LogoutToken {
  realm: string;
  /** `iss`, which scopes `jti`. */
  issuer: string;
  tokenId: string;
  sessionId?: string;
  userId?: string;
}

/** A logout token's verdict: what it names, or why it is refused. */
export type LogoutTokenVerdict = { token: LogoutToken } | { refused: LogoutTokenFault };

/** Far above a Keycloak logout token (about 1 KiB); larger is no token of ours. */
const MAX_TOKEN_LENGTH = 8 * 1024;
// The signature may be empty: an unsigned (`alg: none`) token is refused for its algorithm.
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export interface LogoutTokenOptions {
  jwks: Pick<JwksRegistry, 'keySetFor'>;
  publicUrl: string;
  /** The clients of the realm whose logout tokens the gateway takes (`aud`). */
  audiencesOf: (realm: string) => readonly string[];
  /** How old (`iat`) a logout token may be: Keycloak posts it as it signs it. */
  maxAgeSeconds: number;
  leewaySeconds: number;
  clock?: Clock;
}

/**
 * Validates a logout token as OpenID Connect Back-Channel Logout 1.0, section 2.6, says, but for
 * `jti` (whose single use the caller records, once the rest holds): the realm is read from `iss`
 * (exactly `PUBLIC_URL/auth/realms/<realm>`, as the Bearer verifier's issuer; a realm the gateway
 * serves, else no key set is fetched: jwks.ts), and the token is
 * signed by a key of that realm's key set with an asymmetric algorithm (the Bearer verifier's
 * list); `aud` names one of the realm's clients the gateway takes them for; `exp` present and
 * not past, and `iat` within `maxAgeSeconds` (and not ahead), with the leeway; `events` has the back-channel logout member,
 * an object; `sid` or `sub`; no `nonce`.
 */
export function createLogoutTokenVerifier(options: LogoutTokenOptions) {
  const { clock = systemClock } = options;
  const prefix = realmIssuer(options.publicUrl, '');

  /** `client`: the poster's address, whose share of the organization lookups a realm spends. */
  return async (token: string, client?: string): Promise<LogoutTokenVerdict> => {
    if (token.length > MAX_TOKEN_LENGTH || !COMPACT_JWS.test(token)) return refused('malformed');
    let issuer: unknown;
    let algorithm: unknown;
    try {
      issuer = decodeJwt(token).iss;
      algorithm = decodeProtectedHeader(token).alg;
    } catch {
      return refused('malformed');
    }
    const realm =
      typeof issuer === 'string' && issuer.startsWith(prefix) && issuer.slice(prefix.length);
    if (!realm || (realm !== MASTER_REALM && !isOrganizationId(realm))) {
      return refused('unknown_issuer');
    }
    // Before any key set is touched: `none` or HMAC never fetches one.
    if (typeof algorithm !== 'string' || !ALLOWED_ALGORITHMS.includes(algorithm)) {
      return refused('bad_signature');
    }
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, options.jwks.keySetFor(realm, client), {
        issuer: realmIssuer(options.publicUrl, realm),
        algorithms: ALLOWED_ALGORITHMS,
        clockTolerance: options.leewaySeconds,
        currentDate: new Date(clock.now()),
        // Section 2.4 requires `exp`; Keycloak's carry it (`iat` + 120 s). jose refuses one past.
        requiredClaims: ['iat', 'exp', 'jti'],
      }));
    } catch (err) {
      return refused(faultOf(err));
    }
    return checkClaims(realm, payload);
  };

  function checkClaims(realm: string, payload: JWTPayload): LogoutTokenVerdict {
    const audiences = typeof payload.aud === 'string' ? [payload.aud] : (payload.aud ?? []);
    const ours = options.audiencesOf(realm);
    if (!audiences.some((audience) => ours.includes(audience))) return refused('wrong_audience');
    const now = clock.now() / 1000;
    const { leewaySeconds, maxAgeSeconds } = options;
    const issuedAt = Number(payload.iat);
    if (issuedAt > now + leewaySeconds || issuedAt < now - maxAgeSeconds - leewaySeconds) {
      return refused('stale');
    }
    const events = payload.events as Record<string, unknown> | undefined;
    const event = typeof events === 'object' && events !== null && events[BACKCHANNEL_LOGOUT_EVENT];
    if (typeof event !== 'object' || event === null || Array.isArray(event)) {
      return refused('no_event');
    }
    const sessionId = named(payload.sid);
    const userId = named(payload.sub);
    if (payload.sid !== undefined && sessionId === undefined) return refused('no_subject');
    if (payload.sub !== undefined && userId === undefined) return refused('no_subject');
    if (sessionId === undefined && userId === undefined) return refused('no_subject');
    if (payload.nonce !== undefined) return refused('nonce');
    const tokenId = named(payload.jti);
    if (tokenId === undefined) return refused('malformed');
    return {
      token: { realm, issuer: String(payload.iss), tokenId, sessionId, userId },
    };
  }
}

export type LogoutTokenVerifier = ReturnType<typeof createLogoutTokenVerifier>;

const refused = (fault: LogoutTokenFault): LogoutTokenVerdict => ({ refused: fault });

/** A claim naming a session, a user or a token: a short string that can be sent as it is. */
function named(value: unknown): string | undefined {
  return isHeaderSafe(value) ? value : undefined;
}

/** jose's refusal, as the closed list says it. */
function faultOf(err: unknown): LogoutTokenFault {
  // No such organization: no key set was fetched.
  if (err instanceof RealmNotServed) return 'unknown_issuer';
  if (err instanceof joseErrors.JWTExpired) return 'stale';
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    if (err.reason === 'missing') return 'malformed';
    if (err.claim === 'iss') return 'unknown_issuer';
    if (err.claim === 'iat' || err.claim === 'nbf') return 'stale';
    return 'malformed';
  }
  if (
    err instanceof joseErrors.JOSEAlgNotAllowed ||
    err instanceof joseErrors.JWSSignatureVerificationFailed ||
    err instanceof joseErrors.JWKSNoMatchingKey ||
    err instanceof joseErrors.JWKSMultipleMatchingKeys
  ) {
    return 'bad_signature';
  }
  // The key set could not be fetched (the client layer's 503/504/502), or holds nothing usable.
  if (err instanceof AppError || err instanceof joseErrors.JWKSInvalid)
    return 'key_set_unavailable';
  return 'malformed';
}
