import { AppError } from '../envelope/errors.ts';
import type { ThrottleDecision, ThrottleScope } from './login-throttle.ts';

/** The throttle's refusal in words: which limit, and how long to wait. */
export function throttleMessage(scope: ThrottleScope, retryAfter: number): string {
  const whose =
    scope === 'account_address' ? 'of this account from your address' : 'from your address';
  return `Too many failed logins ${whose}; retry in ${retryAfter} s.`;
}

/**
 * What a login the throttle did not let through is answered on the API and the login form:
 * 429 `429-00001` naming the limit, or, when attempts in flight still hold the budget past the
 * wait bound (Keycloak is that slow), 503 `503-11001`; both with Retry-After.
 */
export function throttleRefusal(decision: Exclude<ThrottleDecision, { kind: 'go' }>): AppError {
  const headers = { 'retry-after': String(decision.retryAfter) };
  if (decision.kind === 'busy') {
    return new AppError('identityProviderUnavailable', {
      message: `Logins from your address are waiting on the identity provider; retry in ${decision.retryAfter} s.`,
      headers,
    });
  }
  return new AppError('tooManyFailedLogins', {
    message: throttleMessage(decision.scope, decision.retryAfter),
    headers,
  });
}
