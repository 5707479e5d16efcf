import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { sendError } from '../envelope/error-handler.ts';
import { AppError } from '../envelope/errors.ts';
import { readsAnswer } from './auth-proxy.ts';
import type { IdenticalGrants } from './identical-grants.ts';
import { isRequiredActionPage, realmOf } from './auth-routes.ts';
import { bufferedBodyOf, formFieldsOf } from './form-body-guard.ts';
import type { AuthMetrics } from '../auth/auth-metrics.ts';
import type { AccountLocks } from '../auth/account-locks.ts';
import type { FailedLoginMemory, LoginCredentials } from '../auth/failed-logins.ts';
import type { LoginAccounts } from '../auth/login-accounts.ts';
import type {
  AttemptOutcome,
  LoginThrottle,
  ThrottleDecision,
  ThrottleScope,
} from '../auth/login-throttle.ts';
import { throttleMessage, throttleRefusal } from '../auth/throttle-refusal.ts';
import {
  grantAnswerOf,
  grantAnswerText,
  isCredentialRefusal,
  isRequestRefusal,
  holdAnswer,
  replayAnswer,
  type GrantAnswer,
} from './grant-answer.ts';

/** A password sent to Keycloak through `/auth`: which form, for which account. */
export type PasswordAttempt = GrantAttempt | FormAttempt;

/** The token endpoint's password grant. */
interface GrantAttempt {
  kind: 'grant';
  realm: string;
  username: string;
  password: string;
  /** What else decides a grant's answer: its client id and one-time password. */
  extra: string[];
}

/** A secret posted to one of Keycloak's login pages. */
interface FormAttempt {
  kind: 'form';
  realm: string;
  /** Undefined when the page posts none (identity-first login, the one-time-password page). */
  username: string | undefined;
  /**
   * The secret fields it posts, in `SECRET_FIELDS`' order: a wrong secret is answered with the
   * page asking for it again. Keycloak checks the one its page asks for, whatever else is
   * posted beside it (a password beside a one-time password guessed on the second factor's page).
   */
  fields: SecretField[];
  /** What it posted in the first of `fields`. */
  password: string;
}

/**
 * What a login page posts that Keycloak checks: a password, a one-time password, or a recovery
 * code (the second factor's page of Keycloak's recovery codes).
 */
const SECRET_FIELDS = ['password', 'otp', 'totp', 'recoveryCodeInput'] as const;
type SecretField = (typeof SECRET_FIELDS)[number];

/**
 * The password attempt of `kind` a `/auth` request carries, from the form the form guard has
 * read: a password grant (on the token entry, whose step is `passwordGrant`), or a password,
 * one-time password or recovery code posted to one of Keycloak's login pages (`passwordForm`:
 * every `login-actions` POST but the registration's; auth-routes.ts), with or without a user
 * name. Refresh-token and client-credential grants are not password guesses, nor is a one-time
 * password being set up (posted with its new secret, `totpSecret`): undefined, as for anything
 * else.
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
  const username = form.get('username')?.trim() || undefined;
  if (kind === 'grant') {
    if (!username || form.get('grant_type') !== 'password') return undefined;
    const password = form.get('password') ?? '';
    // Keycloak's direct grant reads the one-time password from `otp`, then `totp`.
    const oneTimePassword = form.get('otp') ?? form.get('totp') ?? '';
    const extra = [form.get('client_id') ?? '', oneTimePassword];
    return { kind, realm, username, password, extra };
  }
  // Setting up a one-time password posts `totp` with its new `totpSecret` to the required
  // action's page, checking no secret the account has. Only there: Keycloak's one-time-password
  // login reads `totp` when no `otp` comes, and its password form checks `password` whatever
  // else is posted, so a `totpSecret` added elsewhere must not take a guess past the throttle.
  if (form.has('totpSecret') && isRequiredActionPage(req)) return undefined;
  const fields = SECRET_FIELDS.filter((name) => form.has(name));
  if (fields.length === 0) return undefined;
  return { kind, realm, username, fields, password: form.get(fields[0]!)! };
}

/**
 * Whether a POST has a body the form guard did not read (not a URL-encoded form): neither the
 * throttle nor the bootstrap administrator's guard can see its fields, so it is refused
 * (`refuseUnreadBodies`: on the token endpoint and every login page), and nothing goes round
 * them. Keycloak refuses such a body on the token endpoint, but reads a `multipart/form-data`
 * one posted to its login pages as the form.
 */
function unreadBody(req: IncomingMessage): boolean {
  if (req.method !== 'POST' || bufferedBodyOf(req)) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (!!length && length !== '0');
}

/**
 * Refuses a POST whose body the form guard did not read (`unreadBody`), in the shape of `kind`:
 * mounted after the form guard and before the throttle, and alone on the registration page,
 * where a password is chosen, never checked (nothing to count), but a user name is posted.
 */
export function refuseUnreadBodies(kind: PasswordAttempt['kind'], logger: Logger): RequestHandler {
  return (req, res, next) => {
    if (unreadBody(req)) refuseUnreadBody(res, kind, logger);
    else next();
  };
}

export interface PasswordAttemptThrottleDeps {
  throttle: LoginThrottle;
  /** Wrong passwords refused within the throttle's window: a repeated grant is answered here. */
  failedLogins: FailedLoginMemory;
  /** Keycloak's lockouts, as Basic reads them: a grant refused during one is not remembered. */
  locks: Pick<AccountLocks, 'blockOf' | 'firstRefusal' | 'refusedDuringLock' | 'ended'>;
  /** The account a login name names (a user's e-mail names the user's), as both key it. */
  accounts: LoginAccounts;
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
 * `error_description`), the login form the envelope. Mount it after `refuseUnreadBodies`.
 * `identical`: the process's one set of grants in flight, whichever listener they came to.
 */
export function throttlePasswordAttempts(
  deps: PasswordAttemptThrottleDeps,
  kind: PasswordAttempt['kind'],
  identical: IdenticalGrants,
): RequestHandler {
  return (req, res, next) => {
    const attempt = passwordAttemptOf(req, kind);
    if (!attempt) {
      next();
      return;
    }
    admit(attempt, deps.clientAddress(req), res, deps, identical).then((admitted) => {
      if (!admitted) return;
      // Read before the client gets it: asked for uncompressed, whatever the client accepts.
      readsAnswer(req);
      next();
    }, next);
  };
}

/**
 * Aborted once the client has left `res` (at once if it already has): watched from the request's
 * first step, since a 'close' that fires during an await is missed by a listener added after it.
 */
function clientGone(res: ServerResponse): AbortSignal {
  const gone = new AbortController();
  if (res.closed || res.destroyed) gone.abort();
  else res.once('close', () => gone.abort());
  return gone.signal;
}

/** A busy 503 for a grant that waited for the identical ones ahead as long as one may take. */
const OVERDUE = { kind: 'busy', retryAfter: 1 } as const;

/**
 * Answers the attempt here (false), or reserves it and settles it once answered (true). The
 * throttle and the failed-login memory know it by its account, whichever name it was typed as.
 * A grant identical to one in flight, from any address, waits for it (`identical`): a repeat of
 * a refused one is then answered from the memory; any other goes on with the throttle's
 * decision for its own address. Whenever its client leaves, its turn ends and its reservation
 * is given back or settled: a client gone takes no further step.
 */
async function admit(
  typed: PasswordAttempt,
  address: string,
  res: ServerResponse,
  deps: PasswordAttemptThrottleDeps,
  identical: IdenticalGrants,
): Promise<boolean> {
  const gone = clientGone(res);
  let attempt = typed;
  let unresolved = false;
  if (typed.username !== undefined) {
    const found = await deps.accounts.accountOf(typed.realm, typed.username, address);
    if ('refusal' in found) {
      refuseThrottled(res, typed.kind, found.refusal, deps);
      return false;
    }
    attempt = { ...typed, username: found.account };
    unresolved = found.unresolved === true;
  }
  let leave: (shared: boolean) => void = () => {};
  if (attempt.kind === 'grant') {
    const { realm, username, password, extra } = attempt;
    const turn = await identical.enter([realm, username, password, ...extra], gone);
    if (turn.kind === 'gone') return false;
    if (turn.kind === 'overdue') {
      refuseThrottled(res, attempt.kind, OVERDUE, deps);
      return false;
    }
    if (turn.kind === 'inFlight') {
      leave = turn.leave;
      // Its client gone, at any step from here: the next identical grant goes on.
      if (gone.aborted) leave(false);
      else gone.addEventListener('abort', () => leave(false), { once: true });
    }
  }
  if (gone.aborted) return false;
  try {
    if (attempt.kind === 'grant') {
      const login = { channel: 'grant' as const, ...attempt };
      const remembered = grantAnswerOf(await deps.failedLogins.recall(login));
      if (remembered) {
        leave(true);
        replayAnswer(res, remembered);
        return false;
      }
      const again = await refusedDuringLock(login, deps);
      if (again) {
        // The identical grants waiting find the same answer: the lock lasts for them too.
        leave(true);
        replayAnswer(res, again);
        return false;
      }
    }
    const decision = await deps.throttle.begin(attempt.realm, attempt.username, address);
    if (decision.kind !== 'go') {
      leave(false);
      refuseThrottled(res, attempt.kind, decision, deps);
      return false;
    }
    const warn = (err: unknown) => {
      deps.logger.warn({ err }, 'could not settle a password attempt with the login throttle');
    };
    if (gone.aborted) {
      // Gone before its turn at Keycloak: nothing was checked, nothing to count.
      decision.attempt.settle('released').catch(warn);
      return false;
    }
    const settle = (outcome: AttemptOutcome, shared = false) =>
      decision.attempt.settle(outcome).finally(() => leave(shared));
    // Settled before the client gets the answer: a repeat it sends at once finds it remembered
    // or counted.
    holdAnswer(res, (answer) =>
      outcomeOf(attempt, answer, deps, unresolved)
        .then(
          (outcome) => settle(outcome, sharesAnswer(attempt, answer)),
          // Not held until the reservation expires (nor the identical grants kept waiting):
          // what the memory could not keep is no answer to count or share.
          (err: unknown) => {
            warn(err);
            return settle('released');
          },
        )
        .catch(warn),
    );
    res.once('close', () => {
      // Gone before the answer: Keycloak may have checked the password; count it.
      if (!res.writableFinished) settle('failed').catch(warn);
    });
    return true;
  } catch (err) {
    leave(false);
    throw err;
  }
}

/**
 * Whether an identical grant finds what `answer` was once it is settled (`outcomeOf`): a token
 * (the right password: identical grants go on together), or a refusal of the credentials, kept
 * by the failed-login memory. Anything else is no answer for them: the next one asks Keycloak.
 */
function sharesAnswer(attempt: PasswordAttempt, answer: GrantAnswer): boolean {
  if (attempt.kind !== 'grant' || answer.status >= 500) return false;
  return answer.status === 200 || (!isRequestRefusal(answer) && isCredentialRefusal(answer));
}

/**
 * How Keycloak's answer settles an attempt: an answer it could not give (5xx: unreachable, too
 * slow, failing) is released; a token (200) succeeded; a refusal of the request itself, not of
 * a password (`isRequestRefusal`), is released; a grant refused for its credentials is
 * remembered and a failure the first time only; any other refusal is a failure. The login
 * form's answers are read by `formOutcomeOf`.
 */
async function outcomeOf(
  attempt: PasswordAttempt,
  answer: GrantAnswer,
  deps: PasswordAttemptThrottleDeps,
  unresolved = false,
): Promise<AttemptOutcome> {
  if (answer.status >= 500) return 'released';
  if (attempt.kind === 'form') {
    const outcome = formOutcomeOf(answer, attempt.fields);
    // Only a page posting the account and its password alone (no second factor beside it) says
    // whose password was right.
    if (
      outcome === 'loggedIn' &&
      attempt.username !== undefined &&
      attempt.fields.length === 1 &&
      attempt.fields[0] === 'password'
    ) {
      const { realm, username, password } = attempt;
      await deps.failedLogins.succeeded({ channel: 'grant', realm, username, password });
    }
    return outcome === 'refused' ? 'failed' : 'released';
  }
  const login = { channel: 'grant' as const, ...attempt };
  if (answer.status === 200) {
    deps.locks.ended(attempt.realm, attempt.username);
    await deps.failedLogins.succeeded(login);
    return 'succeeded';
  }
  if (isRequestRefusal(answer)) return 'released';
  if (!isCredentialRefusal(answer)) return 'failed';
  // Keycloak's lockout refuses the right password in a wrong one's words: such a refusal is
  // counted (its first time in the lock), as on Basic, but not remembered, or the password would
  // be refused past the lock. An account the admin API could not tell (a login by e-mail) is not
  // asked about: its refusal is a wrong password's, as when the lookup fails.
  if (!unresolved && (await deps.locks.blockOf(attempt.realm, attempt.username)).lockedOut) {
    return deps.locks.firstRefusal(login, grantAnswerText(answer)) ? 'failed' : 'released';
  }
  return (await deps.failedLogins.remember(login, grantAnswerText(answer))) ? 'failed' : 'released';
}

/**
 * Keycloak's answer to a grant it refused during the lock of its account, while that lock lasts:
 * a repeat is answered so without a grant and uncounted, as Basic answers it, so repeats cannot
 * count towards Keycloak's next lock once this one is over. The lock is read afresh (one admin
 * read for concurrent repeats): a grant has no kept login to tell a lock lifted early, and the
 * right password refused during the lock is granted at once after it.
 */
async function refusedDuringLock(
  login: LoginCredentials,
  deps: PasswordAttemptThrottleDeps,
): Promise<GrantAnswer | undefined> {
  const answer = grantAnswerOf(deps.locks.refusedDuringLock(login));
  if (!answer) return undefined;
  const block = await deps.locks.blockOf(login.realm, login.username, true);
  return block.lockedOut ? answer : undefined;
}

/** A field named `name` in a page: what Keycloak's page shows again after a wrong secret. */
const fieldPattern = (name: string) => new RegExp(`\\bname\\s*=\\s*["']?${name}["'\\s/>]`, 'i');
const SECRET_FIELD_PATTERNS = new Map(SECRET_FIELDS.map((name) => [name, fieldPattern(name)]));

/**
 * What Keycloak's answer to its login page says of the secrets posted in `fields` (a password, a
 * one-time password, a recovery code), read from the answer itself: Keycloak answers a wrong one
 * with the page asking for it again (200), and a right one with the next step, a redirect or,
 * for an account with a one-time password, that step's page (200 too).
 * - `refused`: a page with one of `fields` again (whichever of them the page checked, so a
 *   password posted beside a one-time password never hides a wrong one), or an answer not read
 *   (not an HTML page, or compressed though asked for uncompressed, or a redirect to no URL);
 * - `loggedIn`: a redirect out of the login pages (to the client, with its code);
 * - `noVerdict`: a redirect back into the login pages (the form posted twice or stale, or an
 *   action the account must take) or a page without those fields (the next step's, or an error
 *   page): the secret was accepted or never checked.
 * A login on the form never clears the failures of the pair: whose login a redirect completes
 * is not in the answer (the browser may hold another account's session). `loggedIn` is only
 * told to the failed-login memory, whose remembered failures it drops (the stricter way).
 */
export function formOutcomeOf(
  answer: GrantAnswer,
  fields: readonly SecretField[] = ['password'],
): 'refused' | 'loggedIn' | 'noVerdict' {
  if (answer.status >= 300 && answer.status < 400) {
    const location = URL.parse(answer.headers.location ?? '', 'http://keycloak.invalid');
    // No browser follows it: nothing logged in, and the stricter reading counts it.
    if (!location) return 'refused';
    return location.pathname.includes('/login-actions/') ? 'noVerdict' : 'loggedIn';
  }
  const page = /<html[\s>]/i.test(answer.body);
  if (!page) return 'refused';
  return fields.some((field) => SECRET_FIELD_PATTERNS.get(field)!.test(answer.body))
    ? 'refused'
    : 'noVerdict';
}

/** A password grant whose body is no form, as the token endpoint refuses it. */
export const UNREAD_GRANT_BODY = {
  status: 400,
  error: 'invalid_request',
  description: 'The token endpoint takes an application/x-www-form-urlencoded body.',
} as const;

function refuseUnreadBody(res: ServerResponse, kind: PasswordAttempt['kind'], logger: Logger) {
  if (kind === 'form') {
    const message = "Keycloak's login pages take an application/x-www-form-urlencoded body.";
    sendError(res, new AppError('badRequestBody', { message }), logger);
    return;
  }
  const { status, error, description } = UNREAD_GRANT_BODY;
  res.statusCode = status;
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ error, error_description: description }));
}

/**
 * A password grant the throttle refused, as the token endpoint answers it: in OAuth's shape
 * (the API and the login form answer 429 `429-00001` in the envelope), with `Retry-After`. The
 * API description documents the token endpoint's 429 from this.
 */
export function throttledGrant(scope: ThrottleScope, retryAfter: number) {
  return {
    status: 429,
    // As Auth0 names it; OAuth 2.0 has no error code for a throttled grant.
    body: { error: 'too_many_attempts', error_description: throttleMessage(scope, retryAfter) },
  } as const;
}

/**
 * Answers a password attempt of `kind` the throttle did not let through (counted as throttled
 * when refused): a login form in the envelope, a grant in the token endpoint's shape
 * (`throttledGrant`) or, when busy, the envelope's 503.
 */
export function refuseThrottled(
  res: ServerResponse,
  kind: PasswordAttempt['kind'],
  decision: Exclude<ThrottleDecision, { kind: 'go' }>,
  deps: Pick<PasswordAttemptThrottleDeps, 'metrics' | 'logger'>,
): void {
  if (decision.kind === 'refused') deps.metrics.authFailure('password_grant', 'throttled');
  if (kind === 'form' || decision.kind === 'busy') {
    sendError(res, throttleRefusal(decision), deps.logger);
    return;
  }
  const { status, body } = throttledGrant(decision.scope, decision.retryAfter);
  res.statusCode = status;
  res.setHeader('retry-after', String(decision.retryAfter));
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify(body));
}
