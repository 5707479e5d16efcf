import type { IncomingMessage } from 'node:http';
import { AppError } from '../envelope/errors.ts';
import { whenKnown, type Answer } from './answer.ts';
import type { AuthMetrics } from './auth-metrics.ts';
import { AuthFailure } from './auth-failure.ts';
import type { BasicAuthenticator } from './basic/basic-authenticator.ts';
import { parseBasicCredentials } from './basic/parse-basic.ts';
import { tokenHashOf, type BearerVerifier } from './bearer/bearer-verifier.ts';
import type { ActiveCheck } from './bearer/active-check.ts';
import type { DpopScheme } from './dpop/dpop-scheme.ts';
import { apiClientIdOf } from '../tenancy/identifiers.ts';
import type { Principal } from '../tenancy/principal.ts';
import type { RevocationList } from './revocation.ts';

export interface AuthenticateDeps {
  basic: BasicAuthenticator;
  bearer: BearerVerifier;
  /** `Authorization: DPoP`: the proof of a bound token (dpop/). */
  dpop: DpopScheme;
  revocations: RevocationList;
  activeCheck: ActiveCheck;
  /** Whom failed Basic logins are counted against (see login-throttle.ts); read for Basic only. */
  clientAddressOf: (req: IncomingMessage) => string;
  metrics: Pick<AuthMetrics, 'authFailure'>;
  /** The URL of the realm's protected-resource metadata, which Bearer and DPoP challenges name. */
  resourceMetadataOf: (realm: string) => string;
  /**
   * Whether the realm's API client requires DPoP (the organization's switch), from the memory
   * the resource metadata publishes it from (dpop/dpop-switch.ts): at once while fresh.
   */
  dpopRequired: (realm: string) => Answer<boolean>;
}

/**
 * Authenticates the request's Authorization header for `realm` (`path`: the request's, as the
 * edge read it, which a DPoP proof's `htu` names). Each scheme yields a principal or fails; a
 * token bound to a key is served with the DPoP scheme only; revoked sessions are refused; this
 * is the one place failures become 401 `401-00002` with the challenge of the scheme that failed
 * (every scheme's when no credentials came). The principal
 * comes at once when every answer is in memory (a verified token not due for a re-check, a
 * cached login), else as a promise; a refusal is the same error, thrown or rejected. Every
 * refusal is counted here, by reason, throttled logins included.
 */
export function authenticateRequest(
  req: IncomingMessage,
  realm: string,
  path: string,
  deps: AuthenticateDeps,
): Answer<Principal> {
  try {
    const principal = principalFor(req, realm, path, deps);
    return principal instanceof Promise
      ? principal.catch((err: unknown) => refused(err, realm, deps))
      : principal;
  } catch (err) {
    return refused(err, realm, deps);
  }
}

/** Counts a refusal and throws it as the client is to hear it. */
function refused(err: unknown, realm: string, deps: AuthenticateDeps): never {
  if (err instanceof AuthFailure) {
    deps.metrics.authFailure(err.scheme, err.reason);
    throw unauthorized(realm, err, deps);
  }
  if (err instanceof AppError && err.code === 'tooManyFailedLogins') {
    deps.metrics.authFailure('basic', 'throttled');
  }
  throw err;
}

function principalFor(
  req: IncomingMessage,
  realm: string,
  path: string,
  deps: AuthenticateDeps,
): Answer<Principal> {
  const header = req.headers.authorization;
  // The common case, without a regex over the whole header. The token's syntax is checked by
  // the verifier, only for tokens it does not know.
  const bearer = plainToken(header, 'Bearer ');
  if (bearer !== undefined) return bearerPrincipal(bearer, realm, deps);
  const dpop = plainToken(header, 'DPoP ');
  if (dpop !== undefined) return dpopPrincipal(req, path, dpop, realm, deps);
  if (header === undefined || header.trim() === '') throw new MissingCredentials();
  const match = /^([A-Za-z]+)(?: +(.*))?$/.exec(header.trim());
  const scheme = match?.[1]?.toLowerCase();
  const value = match?.[2] ?? '';
  if (scheme === 'bearer') {
    if (value === '') throw new AuthFailure('bearer', 'malformed', 'The Bearer token is missing.');
    return bearerPrincipal(value, realm, deps);
  }
  if (scheme === 'dpop') {
    if (value === '') throw new AuthFailure('dpop', 'malformed', 'The DPoP token is missing.');
    return dpopPrincipal(req, path, value, realm, deps);
  }
  if (scheme === 'basic') {
    const credentials = parseBasicCredentials(value);
    if ('invalid' in credentials) throw new AuthFailure('basic', 'malformed', credentials.invalid);
    const login = deps.basic.authenticate(realm, credentials, deps.clientAddressOf(req));
    return whenKnown(login, refuseRevoked, deps.revocations);
  }
  throw new MissingCredentials('Unsupported authorization scheme; use Basic, Bearer or DPoP.');
}

/**
 * The token of `<scheme><token>` (`scheme` with its space, as clients spell it) with nothing
 * around the token, else undefined.
 */
function plainToken(header: string | undefined, scheme: string): string | undefined {
  if (
    header?.startsWith(scheme) &&
    header.charCodeAt(scheme.length) > 0x20 &&
    header.charCodeAt(header.length - 1) > 0x20
  ) {
    return header.slice(scheme.length);
  }
  return undefined;
}

function bearerPrincipal(token: string, realm: string, deps: AuthenticateDeps): Answer<Principal> {
  const verified = deps.bearer.verify(realm, token);
  return verified instanceof Promise
    ? verified.then((principal) => unboundPrincipal(token, principal, deps))
    : unboundPrincipal(token, verified, deps);
}

/**
 * A Bearer token's principal: a token bound to a key is not a bearer token (RFC 9449 7.2), and
 * a realm whose API client requires DPoP takes no unbound token of another client: Keycloak
 * binds the API client's tokens only, and any other client of the realm allowed a grant (one a
 * realm administrator added) would otherwise carry the realm's users past the switch. The API
 * client's own unbound token was issued before the switch (Keycloak refuses it every grant
 * without a proof since, refreshes too): served until it expires, without asking for the switch
 * (docs/security-model.md, "The switch on `/api`").
 */
function unboundPrincipal(
  token: string,
  principal: Principal,
  deps: AuthenticateDeps,
): Answer<Principal> {
  if (principal.boundKey !== undefined) {
    throw new AuthFailure(
      'dpop',
      'bad_token',
      'This token is bound to a key; use the DPoP scheme with a proof.',
    );
  }
  if (principal.clientId === apiClientIdOf(principal.realm)) {
    return activePrincipal(token, principal, deps);
  }
  const required = deps.dpopRequired(principal.realm);
  return required instanceof Promise
    ? required.then((on) => unlessDpopRequired(on, token, principal, deps))
    : unlessDpopRequired(required, token, principal, deps);
}

function unlessDpopRequired(
  required: boolean,
  token: string,
  principal: Principal,
  deps: AuthenticateDeps,
): Answer<Principal> {
  if (required) {
    throw new AuthFailure(
      'dpop',
      'dpop_required',
      'This API requires DPoP: a token bound to a key (log in with a DPoP proof), sent with the DPoP scheme.',
    );
  }
  return activePrincipal(token, principal, deps);
}

/**
 * A DPoP token's principal: verified as any token, then its proof (never cached) checked; the
 * token's SHA-256 is computed once, for both (the verified tokens' key, the proof's `ath`). A
 * refusal of the token itself is answered with the DPoP challenge, as `invalid_token`.
 */
async function dpopPrincipal(
  req: IncomingMessage,
  path: string,
  token: string,
  realm: string,
  deps: AuthenticateDeps,
): Promise<Principal> {
  try {
    const tokenHash = tokenHashOf(token);
    const principal = await deps.bearer.verify(realm, token, tokenHash);
    await deps.dpop.prove(req, path, token, principal, tokenHash);
    return await activePrincipal(token, principal, deps);
  } catch (err) {
    if (!(err instanceof AuthFailure) || err.scheme === 'dpop') throw err;
    throw new AuthFailure('dpop', err.reason, err.publicMessage, { cause: err });
  }
}

/** A verified token's principal, unless revoked or found inactive by its re-check. */
function activePrincipal(
  token: string,
  principal: Principal,
  deps: AuthenticateDeps,
): Answer<Principal> {
  refuseRevoked(principal, deps.revocations);
  return whenKnown(deps.activeCheck.ensureActive(token, principal), sameAs, principal);
}

/** `principal` once a step that answers nothing has passed (no closure on the hot path). */
const sameAs = (_passed: void, principal: Principal): Principal => principal;

/**
 * Tokens of a revoked session, of one client's part of a session, a token revoked alone (RFC
 * 7009), Bearer tokens of a user issued before that user was disabled, deleted or lost a
 * workspace (or whose realm's sessions all ended), and those carrying a role deleted since, are
 * refused at once, by every replica (see
 * revocation.ts). Basic logins need no such check: cached ones older than the user's revocation
 * are dropped by the authenticator, and a fresh one reflects Keycloak as it is now.
 */
function refuseRevoked(principal: Principal, revocations: RevocationList): Principal {
  if (
    (principal.sessionId !== undefined &&
      revocations.isSessionRevoked(principal.realm, principal.sessionId)) ||
    (principal.tokenId !== undefined &&
      revocations.isTokenRevoked(principal.realm, principal.tokenId)) ||
    (principal.sessionId !== undefined &&
      principal.clientId !== undefined &&
      revocations.isClientSessionRevoked(
        principal.realm,
        principal.sessionId,
        principal.clientId,
        principal.issuedAt,
      )) ||
    (principal.method === 'bearer' &&
      (revocations.isIssuedBeforeRevocation(
        principal.realm,
        principal.userId,
        principal.issuedAt,
      ) ||
        revocations.carriesEndedRole(principal)))
  ) {
    throw new AuthFailure(principal.method, 'revoked', 'Token has been revoked.');
  }
  return principal;
}

/** The refusals of a proof rather than of the token: each a DPoP challenge's `invalid_dpop_proof`. */
const PROOF_REFUSALS: ReadonlySet<AuthFailure['reason']> = new Set([
  'bad_proof',
  'replayed_proof',
  'proof_store_full',
  'proof_key_share',
]);

/**
 * RFC 9449 sections 7.1 and 9: a problem with the proof, a proof without the server's nonce, or
 * a problem with the token itself.
 */
function dpopErrorOf(failure: AuthFailure): string {
  if (failure.reason === 'nonce_required') return 'use_dpop_nonce';
  return PROOF_REFUSALS.has(failure.reason) ? 'invalid_dpop_proof' : 'invalid_token';
}

class MissingCredentials extends AuthFailure {
  constructor(message = 'Authentication required.') {
    super('bearer', 'missing', message);
  }
}

/** An RFC 7235 quoted string: double quotes, backslashes and all but printable ASCII left out. */
function quoted(value: string): string {
  return `"${value.replace(/[^\x20\x21\x23-\x5b\x5d-\x7e]/g, '')}"`;
}

/**
 * The 401 of `failure`, with the challenge of its scheme: Basic's; Bearer's or DPoP's with
 * `invalid_token` (the token itself), DPoP's with `invalid_dpop_proof` (its proof); every
 * scheme's when no credentials came. Each names the realm's metadata (RFC 9728 section 5.1),
 * Basic's too: a client refused there learns which tokens the resource takes instead. A 401
 * that is not the client's credentials' (`401-00001`, the gateway's own service token refused
 * by Keycloak) keeps its code and message, with every scheme's challenge and no error: RFC 7235
 * requires a challenge on every 401, and RFC 6750 names no error the client did not make.
 */
export function unauthorized(
  realm: string,
  failure: AuthFailure | AppError,
  deps: Pick<AuthenticateDeps, 'dpop' | 'resourceMetadataOf'>,
): AppError {
  if (failure instanceof AppError) {
    return new AppError(failure.code, {
      message: failure.message,
      data: failure.data,
      headers: { ...failure.headers, 'www-authenticate': challengeOf(realm, undefined, deps) },
      cause: failure.cause,
    });
  }
  const challenge = challengeOf(realm, failure, deps);
  // RFC 9449 section 9: the nonce the next proof must carry.
  const nonce = failure.reason === 'nonce_required' ? deps.dpop.nonce?.() : undefined;
  return new AppError('authenticationFailed', {
    message: failure.publicMessage,
    headers: { 'www-authenticate': challenge, ...(nonce && { 'dpop-nonce': nonce }) },
    cause: failure,
  });
}

/** The challenge of `failure`'s scheme; every scheme's, without an error, for none. */
function challengeOf(
  realm: string,
  failure: AuthFailure | undefined,
  deps: Pick<AuthenticateDeps, 'dpop' | 'resourceMetadataOf'>,
): string {
  const basic = `Basic realm=${quoted(realm)}, charset="UTF-8"`;
  // RFC 9728 section 5.1: where a client learns what this resource expects.
  const metadata = `resource_metadata=${quoted(deps.resourceMetadataOf(realm))}`;
  const bearer = `Bearer realm=${quoted(realm)}, ${metadata}`;
  const dpop = `DPoP realm=${quoted(realm)}, algs=${quoted(deps.dpop.algs)}, ${metadata}`;
  if (failure === undefined || failure instanceof MissingCredentials) {
    return `${bearer}, ${dpop}, ${basic}`;
  }
  if (failure.scheme === 'basic') return `${basic}, ${metadata}`;
  const described = `error_description=${quoted(failure.publicMessage)}`;
  if (failure.scheme === 'bearer') return `${bearer}, error="invalid_token", ${described}`;
  return `${dpop}, error="${dpopErrorOf(failure)}", ${described}`;
}
