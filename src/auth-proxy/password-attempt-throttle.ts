import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { sendError } from '../envelope/error-handler.ts';
import { AppError } from '../envelope/errors.ts';
import { realmOf } from './auth-routes.ts';
import { bufferedBodyOf, formFieldsOf } from './form-body-guard.ts';
import type { AuthMetrics } from '../auth/auth-metrics.ts';
import type { FailedLoginMemory } from '../auth/failed-logins.ts';
import type { AttemptOutcome, LoginThrottle, ThrottleDecision } from '../auth/login-throttle.ts';
import { throttleMessage, throttleRefusal } from '../auth/throttle-refusal.ts';
import {
  grantAnswerOf,
  grantAnswerText,
  isCredentialRefusal,
  holdAnswer,
  replayAnswer,
  type GrantAnswer,
} from './grant-answer.ts';

/** A password sent to Keycloak through `/auth`: which form, for which account. */
export interface PasswordAttempt {
  /** `grant`: the token endpoint's password grant; `form`: Keycloak's browser login form. */
  kind: 'grant' | 'form';
  realm: string;
  username: string;
  password: string;
  /** What else decides a grant's answer: its client id and one-time password. */
  extra: string[];
}

/**
 * The password attempt of `kind` a `/auth` request carries, from the form the form guard has
 * read: a password grant (on the token entry, whose step is `passwordGrant`), or a user name and
 * password posted to Keycloak's login form (`passwordForm`; auth-routes.ts). Refresh-token and
 * client-credential grants are not password guesses: undefined, as for anything else.
 */
export function passwordAttemptOf(
  req: IncomingMessage,
  kind: PasswordAttempt['kind'],
): PasswordAttempt | undefined {
  if (req.method !== 'POST') return undefined;
  const realm = realmOf(req);
  if (!realm) return undefined;
  const form = formFieldsOf(req);
  if (!form) return undefined;
  const username = form.get('username')?.trim();
  if (!username) return undefined;
  const password = form.get('password') ?? '';
  if (kind === 'grant' && form.get('grant_type') === 'password') {
    const extra = [form.get('client_id') ?? '', form.get('totp') ?? ''];
    return { kind, realm, username, password, extra };
  }
  if (kind === 'form' && form.has('password')) {
    return { kind, realm, username, password, extra: [] };
  }
  return undefined;
}

/**
 * Whether a POST has a body the form guard did not read (not a URL-encoded form): the throttle
 * cannot see its password, so it is refused here, and no password goes round the throttle.
 * Keycloak refuses such a body on the token endpoint, but reads a `multipart/form-data` one
 * posted to its login form as the form.
 */
function unreadBody(req: IncomingMessage): boolean {
  if (req.method !== 'POST' || bufferedBodyOf(req)) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (!!length && length !== '0');
}

export interface PasswordAttemptThrottleDeps {
  throttle: LoginThrottle;
  /** Wrong passwords refused within the throttle's window: a repeated grant is answered here. */
  failedLogins: FailedLoginMemory;
  /** The client address the edge decided (trusted proxies applied). */
  clientAddress: (req: IncomingMessage) => string;
  metrics: Pick<AuthMetrics, 'authFailure'>;
  logger: Logger;
}

/**
 * The `/auth` step of the one login throttle (login-throttle.ts), which Basic logins pass in
 * the admission. A password grant refused before for a wrong password gets that answer again
 * without Keycloak and uncounted; past a limit, a grant or login form gets 429 with
 * Retry-After and never reaches Keycloak; token clients get Keycloak's error shape (`error`,
 * `error_description`), the login form the envelope. Mount it after the form guard.
 */
export function throttlePasswordAttempts(
  deps: PasswordAttemptThrottleDeps,
  kind: PasswordAttempt['kind'],
): RequestHandler {
  return (req, res, next) => {
    if (unreadBody(req)) {
      refuseUnreadBody(res, kind, deps.logger);
      return;
    }
    const attempt = passwordAttemptOf(req, kind);
    if (!attempt) {
      next();
      return;
    }
    admit(attempt, deps.clientAddress(req), res, deps).then((admitted) => admitted && next(), next);
  };
}

/** Answers the attempt here (false), or reserves it and settles it once answered (true). */
async function admit(
  attempt: PasswordAttempt,
  address: string,
  res: ServerResponse,
  deps: PasswordAttemptThrottleDeps,
): Promise<boolean> {
  const login = { channel: 'grant' as const, ...attempt };
  if (attempt.kind === 'grant') {
    const remembered = grantAnswerOf(await deps.failedLogins.recall(login));
    if (remembered) {
      replayAnswer(res, remembered);
      return false;
    }
  }
  const decision = await deps.throttle.begin(attempt.realm, attempt.username, address);
  if (decision.kind !== 'go') {
    if (decision.kind === 'refused') deps.metrics.authFailure('password_grant', 'throttled');
    refuse(res, attempt, decision, deps.logger);
    return false;
  }
  const { settle } = decision.attempt;
  const warn = (err: unknown) => {
    deps.logger.warn({ err }, 'could not settle a password attempt with the login throttle');
  };
  // Settled before the client gets the answer: a repeat it sends at once finds it remembered
  // or counted.
  holdAnswer(res, (answer) => outcomeOf(attempt, answer, deps).then(settle).catch(warn));
  res.once('close', () => {
    // Gone before the answer: Keycloak may have checked the password; count it.
    if (!res.writableFinished) settle('failed').catch(warn);
  });
  return true;
}

/**
 * How Keycloak's answer settles an attempt: an answer it could not give (5xx: unreachable, too
 * slow, failing) is released; a token (200) succeeded; a grant refused for its credentials is
 * remembered and a failure the first time only; any other refusal is a failure. The login
 * form's answers are read by `formOutcomeOf`.
 */
async function outcomeOf(
  attempt: PasswordAttempt,
  answer: GrantAnswer,
  deps: PasswordAttemptThrottleDeps,
): Promise<AttemptOutcome> {
  const login = { channel: 'grant' as const, ...attempt };
  if (answer.status >= 500) return 'released';
  if (attempt.kind === 'form') {
    const outcome = formOutcomeOf(answer);
    if (outcome === 'loggedIn') await deps.failedLogins.succeeded(login);
    return outcome === 'refused' ? 'failed' : 'released';
  }
  if (answer.status === 200) {
    await deps.failedLogins.succeeded(login);
    return 'succeeded';
  }
  if (!isCredentialRefusal(answer)) return 'failed';
  return (await deps.failedLogins.remember(login, grantAnswerText(answer))) ? 'failed' : 'released';
}

/** A password field in a page: what Keycloak's login form shows again after a wrong password. */
const PASSWORD_FIELD = /\bname\s*=\s*["']?password["'\s/>]/i;

/**
 * What Keycloak's answer to its login form says of the password, read from the answer itself:
 * Keycloak answers a wrong password with the login form again (200), and a right one with the
 * next step, a redirect or, for an account with a one-time password, that step's page (200 too).
 * - `refused`: the login form again, or an answer not read (not an HTML page, or compressed);
 * - `loggedIn`: a redirect out of the login pages (to the client, with its code);
 * - `noVerdict`: a redirect back into the login pages (the form posted twice or stale, or an
 *   action the account must take) or a page without a password field (the next step's, or an
 *   error page): the password was accepted or never checked.
 * A login on the form never clears the failures of the pair: whose login a redirect completes
 * is not in the answer (the browser may hold another account's session). `loggedIn` is only
 * told to the failed-login memory, whose remembered failures it drops (the stricter way).
 */
export function formOutcomeOf(answer: GrantAnswer): 'refused' | 'loggedIn' | 'noVerdict' {
  if (answer.status >= 300 && answer.status < 400) {
    const location = answer.headers.location ?? '';
    return new URL(location, 'http://keycloak.invalid').pathname.includes('/login-actions/')
      ? 'noVerdict'
      : 'loggedIn';
  }
  const page = /<html[\s>]/i.test(answer.body);
  return !page || PASSWORD_FIELD.test(answer.body) ? 'refused' : 'noVerdict';
}

function refuseUnreadBody(res: ServerResponse, kind: PasswordAttempt['kind'], logger: Logger) {
  const message = `${kind === 'grant' ? 'The token endpoint' : 'The login form'} takes an application/x-www-form-urlencoded body.`;
  if (kind === 'form') {
    sendError(res, new AppError('badRequestBody', { message }), logger);
    return;
  }
  res.statusCode = 400;
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ error: 'invalid_request', error_description: message }));
}

function refuse(
  res: ServerResponse,
  attempt: PasswordAttempt,
  decision: Exclude<ThrottleDecision, { kind: 'go' }>,
  logger: Logger,
) {
  if (attempt.kind === 'form' || decision.kind === 'busy') {
    sendError(res, throttleRefusal(decision), logger);
    return;
  }
  res.statusCode = 429;
  res.setHeader('retry-after', String(decision.retryAfter));
  res.setHeader('content-type', 'application/json');
  res.end(
    JSON.stringify({
      // As Auth0 names it; OAuth 2.0 has no error code for a throttled grant.
      error: 'too_many_attempts',
      error_description: throttleMessage(decision.scope, decision.retryAfter),
    }),
  );
}
