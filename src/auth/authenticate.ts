import type { IncomingMessage } from 'node:http';
import { AppError } from '../envelope/errors.ts';
import { whenKnown, type Answer } from './answer.ts';
import type { AuthMetrics } from './auth-metrics.ts';
import { AuthFailure } from './auth-failure.ts';
import type { BasicAuthenticator } from './basic/basic-authenticator.ts';
import { parseBasicCredentials } from './basic/parse-basic.ts';
import type { BearerVerifier } from './bearer/bearer-verifier.ts';
import type { ActiveCheck } from './bearer/active-check.ts';
import type { Principal } from '../tenancy/principal.ts';
import type { RevocationList } from './revocation.ts';

export interface AuthenticateDeps {
  basic: BasicAuthenticator;
  bearer: BearerVerifier;
  revocations: RevocationList;
  activeCheck: ActiveCheck;
  /** Whom failed Basic logins are counted against (see login-throttle.ts); read for Basic only. */
  clientAddressOf: (req: IncomingMessage) => string;
  metrics: Pick<AuthMetrics, 'authFailure'>;
}

/**
 * Authenticates the request's Authorization header for `realm`. Each scheme yields a principal
 * or fails; revoked sessions are refused; this is the one place failures become 401 `401-00002`
 * with the challenge of the scheme that failed (both when no credentials came). The principal
 * comes at once when every answer is in memory (a verified token not due for a re-check, a
 * cached login), else as a promise; a refusal is the same error, thrown or rejected. Every
 * refusal is counted here, by reason, throttled logins included.
 */
export function authenticateRequest(
  req: IncomingMessage,
  realm: string,
  deps: AuthenticateDeps,
): Answer<Principal> {
  try {
    const principal = principalFor(req, realm, deps);
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
    throw unauthorized(realm, err);
  }
  if (err instanceof AppError && err.code === 'tooManyFailedLogins') {
    deps.metrics.authFailure('basic', 'throttled');
  }
  throw err;
}

function principalFor(
  req: IncomingMessage,
  realm: string,
  deps: AuthenticateDeps,
): Answer<Principal> {
  const header = req.headers.authorization;
  // The common case, without a regex over the whole header. The token's syntax is checked by
  // the verifier, only for tokens it does not know.
  const plain = plainBearerToken(header);
  if (plain !== undefined) return bearerPrincipal(plain, realm, deps);
  if (header === undefined || header.trim() === '') throw new MissingCredentials();
  const match = /^([A-Za-z]+)(?: +(.*))?$/.exec(header.trim());
  const scheme = match?.[1]?.toLowerCase();
  const value = match?.[2] ?? '';
  if (scheme === 'bearer') {
    if (value === '') throw new AuthFailure('bearer', 'malformed', 'The Bearer token is missing.');
    return bearerPrincipal(value, realm, deps);
  }
  if (scheme === 'basic') {
    const credentials = parseBasicCredentials(value);
    if ('invalid' in credentials) throw new AuthFailure('basic', 'malformed', credentials.invalid);
    const login = deps.basic.authenticate(realm, credentials, deps.clientAddressOf(req));
    return whenKnown(login, refuseRevoked, deps.revocations);
  }
  throw new MissingCredentials('Unsupported authorization scheme; use Basic or Bearer.');
}

/** The token of `Bearer <token>` with nothing around the token, else undefined. */
function plainBearerToken(header: string | undefined): string | undefined {
  if (
    header?.startsWith('Bearer ') &&
    header.charCodeAt(7) > 0x20 &&
    header.charCodeAt(header.length - 1) > 0x20
  ) {
    return header.slice('Bearer '.length);
  }
  return undefined;
}

function bearerPrincipal(token: string, realm: string, deps: AuthenticateDeps): Answer<Principal> {
  const verified = deps.bearer.verify(realm, token);
  return verified instanceof Promise
    ? verified.then((principal) => activePrincipal(token, principal, deps))
    : activePrincipal(token, verified, deps);
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
 * 7009), and Bearer tokens of a user issued before that user was disabled, deleted or lost a
 * workspace (or whose realm's sessions all ended), are refused at once, by every replica (see
 * revocation.ts). Basic logins need no such check: cached ones older than the user's revocation
 * are dropped by the authenticator, and a fresh one reflects Keycloak as it is now.
 */
function refuseRevoked(principal: Principal, revocations: RevocationList): Principal {
  if (
    (principal.sessionId !== undefined && revocations.isSessionRevoked(principal.sessionId)) ||
    (principal.tokenId !== undefined && revocations.isTokenRevoked(principal.tokenId)) ||
    (principal.sessionId !== undefined &&
      principal.clientId !== undefined &&
      revocations.isClientSessionRevoked(
        principal.sessionId,
        principal.clientId,
        principal.issuedAt,
      )) ||
    (principal.method === 'bearer' &&
      revocations.isIssuedBeforeRevocation(principal.realm, principal.userId, principal.issuedAt))
  ) {
    throw new AuthFailure(principal.method, 'revoked', 'Token has been revoked.');
  }
  return principal;
}

class MissingCredentials extends AuthFailure {
  constructor(message = 'Authentication required.') {
    super('bearer', 'missing', message);
  }
}

function quoted(value: string): string {
  return `"${value.replace(/["\\]/g, '')}"`;
}

function unauthorized(realm: string, failure: AuthFailure): AppError {
  const basic = `Basic realm=${quoted(realm)}, charset="UTF-8"`;
  const bearer = `Bearer realm=${quoted(realm)}`;
  let challenge: string;
  if (failure instanceof MissingCredentials) challenge = `${bearer}, ${basic}`;
  else if (failure.scheme === 'basic') challenge = basic;
  else
    challenge = `${bearer}, error="invalid_token", error_description=${quoted(failure.publicMessage)}`;
  return new AppError('authenticationFailed', {
    message: failure.publicMessage,
    headers: { 'www-authenticate': challenge },
    cause: failure,
  });
}
