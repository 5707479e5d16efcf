import type { Logger } from 'pino';
import { outsideRequest } from '../../edge/request-context.ts';
import type { TokenClient } from '../../keycloak/token-client.ts';
import type { AuthMetrics } from '../auth-metrics.ts';
import { AuthFailure } from '../auth-failure.ts';
import type { Principal } from '../../tenancy/principal.ts';
import type { RevocationList } from '../revocation.ts';

export interface ActiveCheck {
  /** Throws AuthFailure when Keycloak has said the token is no longer active. */
  ensureActive(token: string, principal: Principal): Promise<void>;
  /**
   * The same answer without waiting: false when the token is known inactive, true when it may be
   * served (a due re-check starts in the background), undefined when checks block (interval 0)
   * and only `ensureActive` can tell.
   */
  servable(token: string, principal: Principal): boolean | undefined;
}

/**
 * Background introspections per second and at once, per replica. Beyond either, a due check
 * waits for the token's next request: with many tokens the interval stretches rather than
 * the identity provider being flooded (each introspection costs Keycloak real CPU).
 */
const MAX_CHECKS_PER_SECOND = 50;
const MAX_CHECKS_AT_ONCE = 8;

/**
 * Catches revocations made outside the gateway (a user disabled, sessions deleted in the
 * console): each distinct token is introspected at most once per `intervalSeconds`, in the
 * background, so no request waits for Keycloak; a token found inactive is refused from then
 * on and its session revoked on every replica. `0` checks on every request, before answering
 * (as the platform being replaced did); `off` never checks. When Keycloak cannot be asked, the
 * locally verified token stays accepted: a Keycloak outage must not become an API outage.
 */
export function createActiveCheck(options: {
  tokens: TokenClient;
  revocations: RevocationList;
  intervalSeconds: number | 'off';
  basicCacheSeconds: number;
  metrics: Pick<AuthMetrics, 'recheck'>;
  logger: Logger;
}): ActiveCheck {
  if (options.intervalSeconds === 'off') {
    return { ensureActive: () => Promise.resolve(), servable: () => true };
  }
  const intervalMs = options.intervalSeconds * 1000;
  // The verifier hands out one principal object per cached token, so the object itself keys
  // these: no hash of the token, and entries vanish with the verifier's cache.
  const checkedUntil = new WeakMap<Principal, number>();
  const inactive = new WeakSet<Principal>();
  let running = 0;
  let second = 0;
  let startedThisSecond = 0;

  /** Whether another background check may start now (see the limits above). */
  function mayStart(now: number): boolean {
    if (now - second >= 1000) {
      second = now;
      startedThisSecond = 0;
    }
    return running < MAX_CHECKS_AT_ONCE && startedThisSecond < MAX_CHECKS_PER_SECOND;
  }

  /** Asks Keycloak; true when the token may be served. */
  async function check(token: string, principal: Principal): Promise<boolean> {
    try {
      if (await options.tokens.isActive(principal.realm, token)) {
        options.metrics.recheck('active');
        return true;
      }
    } catch (err) {
      options.metrics.recheck('failed');
      options.logger.warn({ err }, 'token introspection failed; trusting the local verification');
      return true;
    }
    options.metrics.recheck('inactive');
    inactive.add(principal);
    await options.revocations.revoke({
      realm: principal.realm,
      userId: principal.userId,
      sessionIds: principal.sessionId ? [principal.sessionId] : [],
      ttlSeconds: Math.max(principal.expiresAt - Math.floor(Date.now() / 1000), 1),
      userTtlSeconds: Math.max(options.basicCacheSeconds, 1),
    });
    return false;
  }

  const refused = () => new AuthFailure('bearer', 'revoked', 'Token is no longer active.');

  function servable(token: string, principal: Principal): boolean | undefined {
    if (inactive.has(principal)) return false;
    if (intervalMs === 0) return undefined;
    const now = Date.now();
    if ((checkedUntil.get(principal) ?? 0) > now) return true;
    if (!mayStart(now)) {
      options.metrics.recheck('skipped');
      return true;
    }
    checkedUntil.set(principal, now + intervalMs);
    running++;
    startedThisSecond++;
    options.metrics.recheck('queued');
    // The request only starts it and does not wait: its Keycloak call carries no request id.
    void outsideRequest(() => check(token, principal)).finally(() => running--);
    return true;
  }

  return {
    servable,
    async ensureActive(token, principal) {
      if (servable(token, principal) === false) throw refused();
      if (intervalMs === 0 && !(await check(token, principal))) throw refused();
    },
  };
}
