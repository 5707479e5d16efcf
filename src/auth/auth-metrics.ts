import type { AuthFailureReason } from './auth-failure.ts';

/** How a refused authentication came: an API call's scheme, or a password sent through `/auth`. */
export type AuthFailureScheme = 'basic' | 'bearer' | 'dpop' | 'password_grant';

/**
 * What became of a token due for a re-check with Keycloak (bearer/active-check.ts): started
 * (`queued`) or skipped at the rate cap; its answer (`active`, `inactive`, `failed`); `late`
 * when its request was served before the answer, which took longer than the wait bound.
 */
export type RecheckEvent = 'queued' | 'skipped' | 'active' | 'inactive' | 'failed' | 'late';

/**
 * What authentication counts. The metrics (metrics/metrics.ts) implement it: auth/ names what
 * it reports and depends on no metrics code. Every method is called on the hot path.
 */
export interface AuthMetrics {
  authFailure(scheme: AuthFailureScheme, reason: AuthFailureReason | 'throttled'): void;
  cacheLookup(cache: 'verified_token' | 'basic_login', hit: boolean): void;
  recheck(event: RecheckEvent): void;
  revocationApplied(source: 'local' | 'peer'): void;
}
