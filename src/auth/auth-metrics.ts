import { AUTH_FAILURE_REASONS } from './auth-failure.ts';

/** How a refused authentication came: an API call's scheme, or a password sent through `/auth`. */
export const AUTH_FAILURE_SCHEMES = ['basic', 'bearer', 'dpop', 'password_grant'] as const;
export type AuthFailureScheme = (typeof AUTH_FAILURE_SCHEMES)[number];

/**
 * What became of a token due for a re-check with Keycloak (bearer/active-check.ts): started
 * (`queued`) or skipped at the rate cap; its answer (`active`, `inactive`, `failed`); `late`
 * when its request was served before the answer, which took longer than the wait bound.
 */
export const RECHECK_EVENTS = [
  'queued',
  'skipped',
  'active',
  'inactive',
  'failed',
  'late',
] as const;
export type RecheckEvent = (typeof RECHECK_EVENTS)[number];

/**
 * The `reason` of a refused authentication: an `AuthFailure`'s (401), or `throttled`, a login
 * the failed-login memory refused (429, tooManyFailedLogins), which is no `AuthFailure`.
 */
export const AUTH_FAILURE_COUNTED_REASONS = [...AUTH_FAILURE_REASONS, 'throttled'] as const;
export type AuthFailureCountedReason = (typeof AUTH_FAILURE_COUNTED_REASONS)[number];

/** The caches an authentication may be answered from: verified Bearer tokens, Basic logins. */
export const AUTH_CACHES = ['verified_token', 'basic_login'] as const;
export type AuthCache = (typeof AUTH_CACHES)[number];

/** Where a revocation applied here came from: this replica, or another one. */
export const REVOCATION_SOURCES = ['local', 'peer'] as const;
export type RevocationSource = (typeof REVOCATION_SOURCES)[number];

/**
 * What authentication counts. The metrics (metrics/metrics.ts) implement it: auth/ names what
 * it reports and depends on no metrics code. Every method is called on the hot path.
 */
export interface AuthMetrics {
  authFailure(scheme: AuthFailureScheme, reason: AuthFailureCountedReason): void;
  cacheLookup(cache: AuthCache, hit: boolean): void;
  recheck(event: RecheckEvent): void;
  revocationApplied(source: RevocationSource): void;
}
