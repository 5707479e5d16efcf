import type { IncomingMessage } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { scopeOf } from '../edge/request-scope.ts';
import { authEntryOf, realmOf } from './auth-routes.ts';
import { formFieldsOf } from './form-body-guard.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { isBootstrapAdmin } from '../auth/bootstrap-admin.ts';
import type { AuthMetrics } from '../auth/auth-metrics.ts';
import type { LoginAccounts } from '../auth/login-accounts.ts';
import { sendTokenError } from './grant-answer.ts';
import { refuseThrottled, type PasswordAttempt } from './password-attempt-throttle.ts';

export interface BootstrapAdminGuardDeps {
  bootstrapAdmin: string;
  /** Tells the account an e-mail logs in to: Keycloak takes it for the user name. */
  accounts: LoginAccounts;
  clientAddress: (req: IncomingMessage) => string;
  /** Where a refusal of the throttle (the lookup's) is counted and logged, as the throttle's. */
  metrics: Pick<AuthMetrics, 'authFailure'>;
  logger: Logger;
}

/**
 * The public listener's `/auth` step of the bootstrap administrator's rule (auth/bootstrap-admin.ts):
 * no form sent to the master realm (token endpoint, login pages) may name it (auth-steps.ts), by
 * its user name or, where a login can happen (a password grant, a login page), by an e-mail an
 * operator gave it. A form giving `username` more than once is refused: Keycloak reads the
 * first, so the others name nobody, but each would be a name to tell. An e-mail it cannot tell
 * never reaches Keycloak: unresolved it is 503, and where the throttle gave its address no
 * lookup it is the throttle's refusal, answered here.
 */
export function guardBootstrapAdmin(deps: BootstrapAdminGuardDeps): RequestHandler {
  const namesAdmin = (username: string) =>
    isBootstrapAdmin(deps.bootstrapAdmin, MASTER_REALM, username);
  return (req, res, next) => {
    const form = formFieldsOf(req);
    // Any path of the realm (every entry below /auth/realms/{realm} carries the step), the
    // realm's name in any case.
    if (!form || realmOf(req)?.toLowerCase() !== MASTER_REALM) {
      next();
      return;
    }
    const usernames = form.getAll('username');
    if (usernames.length > 1) {
      sendTokenError(res, REPEATED_USERNAME);
      return;
    }
    const [username] = usernames;
    if (username === undefined) {
      next();
      return;
    }
    if (namesAdmin(username)) {
      refuse(res);
      return;
    }
    const login = username.includes('@') ? loginOf(req, form) : undefined;
    if (!login) {
      next();
      return;
    }
    deps.accounts.accountOf(MASTER_REALM, username, deps.clientAddress(req)).then((lookup) => {
      // An address past its limit was told no account. Answered here as the throttle answers
      // it: its step may let the name through (a login page posting it alone has no password
      // to count, and Keycloak ties the login to its account) or, a moment later, be told it.
      if ('refusal' in lookup) refuseThrottled(res, login, lookup.refusal, deps);
      // Not known not to be the bootstrap administrator's: it does not reach Keycloak.
      else if (lookup.unresolved) sendTokenError(res, UNRESOLVED_EMAIL);
      else if (namesAdmin(lookup.account)) refuse(res);
      else next();
    }, next);
  };
}

/**
 * Whether `req` can log an account in by the user name it posts, as the throttle knows the
 * attempt: a password grant on the token entry (`grant`), or any POST to Keycloak's login pages
 * (`form`: its password page, or an identity-first page whose next page asks for the password
 * without the name); undefined for anything else.
 */
function loginOf(req: IncomingMessage, form: URLSearchParams): PasswordAttempt['kind'] | undefined {
  const steps = authEntryOf(scopeOf(req).route)?.steps ?? [];
  if (steps.includes('passwordGrant') && form.get('grant_type') === 'password') return 'grant';
  return steps.includes('passwordForm') ? 'form' : undefined;
}

/** A form giving `username` twice, in the token endpoint's shape of a malformed request. */
export const REPEATED_USERNAME = {
  status: 400,
  error: 'invalid_request',
  description: 'The form gives username more than once.',
} as const;

/** An e-mail whose account Keycloak's admin API could not tell (login-accounts.ts). */
export const UNRESOLVED_EMAIL = {
  status: 503,
  error: 'temporarily_unavailable',
  description: 'Could not tell the account of this e-mail; retry later.',
} as const;

function refuse(res: Parameters<RequestHandler>[1]): void {
  // Keycloak's own answer to a refused grant, so clients need no new case.
  sendTokenError(res, {
    status: 400,
    error: 'invalid_grant',
    description: 'This account signs in on the admin listener only.',
  });
}
