import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { sendError } from '../envelope/error-handler.ts';
import { AppError } from '../envelope/errors.ts';
import { targetOf } from '../edge/request-scope.ts';
import { bufferedBodyOf, formFieldsOf } from './form-body-guard.ts';
import type { AuthMetrics } from '../auth/auth-metrics.ts';
import type { AttemptOutcome, LoginThrottle } from '../auth/login-throttle.ts';

/** A password sent to Keycloak through `/auth`: which form, for which account. */
export interface PasswordAttempt {
  /** `grant`: the token endpoint's password grant; `form`: Keycloak's browser login form. */
  kind: 'grant' | 'form';
  realm: string;
  username: string;
}

const TOKEN_ENDPOINT = ['protocol', 'openid-connect', 'token'];
const LOGIN_FORM = ['login-actions', 'authenticate'];

/**
 * The password attempt a `/auth` request carries, from the form the form guard has read:
 * a password grant on `realms/<realm>/protocol/openid-connect/token`, or a user name and
 * password posted to `realms/<realm>/login-actions/authenticate`. Refresh-token and
 * client-credential grants are not password guesses: undefined, as for anything else.
 */
export function passwordAttemptOf(req: IncomingMessage): PasswordAttempt | undefined {
  if (req.method !== 'POST') return undefined;
  const [, realms, realm, ...rest] = targetOf(req).segments;
  if (realms !== 'realms' || !realm) return undefined;
  const form = formFieldsOf(req);
  if (!form) return undefined;
  const username = form.get('username')?.trim();
  if (!username) return undefined;
  if (sameSegments(rest, TOKEN_ENDPOINT) && form.get('grant_type') === 'password') {
    return { kind: 'grant', realm, username };
  }
  if (sameSegments(rest, LOGIN_FORM) && form.has('password')) {
    return { kind: 'form', realm, username };
  }
  return undefined;
}

/**
 * Whether a token-endpoint POST has a body the form guard did not read (not a URL-encoded
 * form): Keycloak would refuse it, but the throttle could not see its password, so it is
 * refused here first, and no grant ever goes round the throttle.
 */
function unreadTokenRequest(req: IncomingMessage): boolean {
  if (req.method !== 'POST' || bufferedBodyOf(req)) return false;
  const [, realms, realm, ...rest] = targetOf(req).segments;
  if (realms !== 'realms' || !realm || !sameSegments(rest, TOKEN_ENDPOINT)) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (!!length && length !== '0');
}

function sameSegments(actual: string[], expected: string[]): boolean {
  return actual.length === expected.length && actual.every((segment, i) => segment === expected[i]);
}

/**
 * How Keycloak's answer settles an attempt: a token (200) or the login form's redirect (302)
 * succeeded; an answer it could not give (5xx: unreachable, too slow, failing) is taken back;
 * anything else, a refusal or a connection dropped before the answer, stays counted.
 */
function outcomeOf(attempt: PasswordAttempt, res: ServerResponse): AttemptOutcome | undefined {
  if (!res.writableFinished) return undefined;
  if (res.statusCode === (attempt.kind === 'grant' ? 200 : 302)) return 'succeeded';
  return res.statusCode >= 500 ? 'unanswered' : undefined;
}

export interface PasswordAttemptThrottleDeps {
  throttle: LoginThrottle;
  /** The client address the edge decided (trusted proxies applied). */
  clientAddress: (req: IncomingMessage) => string;
  metrics: Pick<AuthMetrics, 'authFailure'>;
  logger: Logger;
}

/**
 * The `/auth` step of the one login throttle (login-throttle.ts), which Basic logins pass in
 * the admission: a password grant or login form past its limits gets 429 with Retry-After and
 * never reaches Keycloak; token clients get Keycloak's error shape (`error`,
 * `error_description`), the login form the envelope. Mount it after the form guard.
 */
export function throttlePasswordAttempts(deps: PasswordAttemptThrottleDeps): RequestHandler {
  return (req, res, next) => {
    if (unreadTokenRequest(req)) {
      res.status(400).json({
        error: 'invalid_request',
        error_description: 'The token endpoint takes an application/x-www-form-urlencoded body.',
      });
      return;
    }
    const attempt = passwordAttemptOf(req);
    if (!attempt) {
      next();
      return;
    }
    const { realm, username } = attempt;
    const address = deps.clientAddress(req);
    deps.throttle.begin(realm, username, address).then((wait) => {
      if (wait > 0) {
        deps.metrics.authFailure('password_grant', 'throttled');
        refuse(res, attempt, wait, deps.logger);
        return;
      }
      res.once('close', () => {
        const outcome = outcomeOf(attempt, res);
        if (!outcome) return;
        deps.throttle.settle(realm, username, address, outcome).catch((err: unknown) => {
          deps.logger.warn({ err }, 'could not settle a password attempt with the login throttle');
        });
      });
      next();
    }, next);
  };
}

function refuse(res: ServerResponse, attempt: PasswordAttempt, wait: number, logger: Logger) {
  const retryAfter = String(wait);
  if (attempt.kind === 'form') {
    sendError(
      res,
      new AppError('tooManyFailedLogins', { headers: { 'retry-after': retryAfter } }),
      logger,
    );
    return;
  }
  res.statusCode = 429;
  res.setHeader('retry-after', retryAfter);
  res.setHeader('content-type', 'application/json');
  res.end(
    JSON.stringify({
      // As Auth0 names it; OAuth 2.0 has no error code for a throttled grant.
      error: 'too_many_attempts',
      error_description: 'Too many failed logins; retry later.',
    }),
  );
}
