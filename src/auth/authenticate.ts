import { AppError } from '../envelope/errors.ts';
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
  metrics: Pick<AuthMetrics, 'authFailure' | 'cacheLookup'>;
}

/**
 * Authenticates an Authorization header value for `realm`. Each scheme yields a principal or
 * fails; revoked sessions are refused; this is the one place failures become 401 `401-00002`
 * with the challenge of the scheme that failed (both when no credentials came). `clientAddress`
 * is whom failed Basic logins are counted against (see login-throttle.ts). Every refusal
 * is counted here, by reason, throttled logins included.
 */
export async function authenticateRequest(
  header: string | undefined,
  realm: string,
  clientAddress: string,
  deps: AuthenticateDeps,
): Promise<Principal> {
  try {
    return await principalFor(header, realm, clientAddress, deps);
  } catch (err) {
    if (err instanceof AuthFailure) {
      deps.metrics.authFailure(err.scheme, err.reason);
      throw unauthorized(realm, err);
    }
    if (err instanceof AppError && err.code === 'tooManyFailedLogins') {
      deps.metrics.authFailure('basic', 'throttled');
    }
    throw err;
  }
}

async function principalFor(
  header: string | undefined,
  realm: string,
  clientAddress: string,
  deps: AuthenticateDeps,
): Promise<Principal> {
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
    const principal = await deps.basic.authenticate(realm, credentials, clientAddress);
    refuseRevoked(principal, deps.revocations);
    return principal;
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

async function bearerPrincipal(
  token: string,
  realm: string,
  deps: AuthenticateDeps,
): Promise<Principal> {
  const principal = await deps.bearer.verify(realm, token);
  refuseRevoked(principal, deps.revocations);
  await deps.activeCheck.ensureActive(token, principal);
  return principal;
}

/**
 * The common cases without a single promise: `Bearer <token>` of a token already verified for
 * this realm, not revoked, not known inactive and not waiting for a blocking re-check, or
 * `Basic <credentials>` of a login this process has cached and whose session is not revoked.
 * Undefined whenever the full `authenticateRequest` is needed, which then also gives every
 * refusal. A principal found here is counted as a cache hit; a miss is counted by the full path.
 */
export function knownPrincipal(
  header: string | undefined,
  realm: string,
  deps: AuthenticateDeps,
): Principal | undefined {
  const token = plainBearerToken(header);
  if (token !== undefined) {
    const principal = deps.bearer.verified(realm, token);
    if (!principal || isRevoked(principal, deps.revocations)) return undefined;
    if (deps.activeCheck.servable(token, principal) !== true) return undefined;
    deps.metrics.cacheLookup('verified_token', true);
    return principal;
  }
  if (!header?.startsWith('Basic ')) return undefined;
  const credentials = parseBasicCredentials(header.slice('Basic '.length));
  if ('invalid' in credentials) return undefined;
  const principal = deps.basic.cached(realm, credentials);
  if (!principal || isRevoked(principal, deps.revocations)) return undefined;
  deps.metrics.cacheLookup('basic_login', true);
  return principal;
}

/**
 * Tokens of a revoked session, of one client's part of a session, a token revoked alone (RFC
 * 7009), and Bearer tokens of a user issued before that user was disabled, deleted or lost a
 * workspace (or whose realm's sessions all ended), are refused at once, by every replica (see
 * revocation.ts). Basic logins need no such check: cached ones older than the user's revocation
 * are dropped by the authenticator, and a fresh one reflects Keycloak as it is now.
 */
function refuseRevoked(principal: Principal, revocations: RevocationList): void {
  if (isRevoked(principal, revocations)) {
    throw new AuthFailure(principal.method, 'revoked', 'Token has been revoked.');
  }
}

function isRevoked(principal: Principal, revocations: RevocationList): boolean {
  return (
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
  );
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
