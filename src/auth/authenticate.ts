import type { RequestHandler, Response } from 'express';
import { AppError } from '../envelope/errors.ts';
import { AuthFailure } from './auth-failure.ts';
import type { BasicAuthenticator } from './basic/basic-authenticator.ts';
import { parseBasicCredentials } from './basic/parse-basic.ts';
import type { BearerVerifier } from './bearer/bearer-verifier.ts';
import type { Principal } from './principal.ts';
import { realmOf } from './realm-routing.ts';

/** RFC 6750 token68 syntax. */
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;

/**
 * Authenticates the request against the realm chosen by the path. Each scheme yields a
 * principal or fails; this is the one place failures become 401 `401-00002` with the
 * challenge of the scheme that failed (both when no credentials came).
 */
export function authenticate(deps: {
  basic: BasicAuthenticator;
  bearer: BearerVerifier;
}): RequestHandler {
  return async (req, res, next) => {
    const realm = realmOf(res);
    try {
      res.locals.principal = await principalFor(req.headers.authorization, realm, deps);
      next();
    } catch (err) {
      next(err instanceof AuthFailure ? unauthorized(realm, err) : err);
    }
  };
}

async function principalFor(
  header: string | undefined,
  realm: string,
  deps: { basic: BasicAuthenticator; bearer: BearerVerifier },
): Promise<Principal> {
  if (header === undefined || header.trim() === '') throw new MissingCredentials();
  const match = /^([A-Za-z]+)(?: +(.*))?$/.exec(header.trim());
  const scheme = match?.[1]?.toLowerCase();
  const value = match?.[2] ?? '';
  if (scheme === 'bearer') {
    if (value === '') throw new AuthFailure('bearer', 'The Bearer token is missing.');
    if (!TOKEN68.test(value)) throw new AuthFailure('bearer', 'Malformed token.');
    return deps.bearer.verify(realm, value);
  }
  if (scheme === 'basic') {
    const credentials = parseBasicCredentials(value);
    if ('invalid' in credentials) throw new AuthFailure('basic', credentials.invalid);
    return deps.basic.authenticate(realm, credentials);
  }
  throw new MissingCredentials('Unsupported authorization scheme; use Basic or Bearer.');
}

class MissingCredentials extends AuthFailure {
  constructor(message = 'Authentication required.') {
    super('bearer', message);
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

/** The principal stored by `authenticate`, if the request got that far. */
export function maybePrincipal(res: Response): Principal | undefined {
  return res.locals.principal as Principal | undefined;
}
