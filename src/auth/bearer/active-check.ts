import type { Logger } from 'pino';
import { REALM_GONE } from '../../keycloak/introspection.ts';
import { REALM_GONE_MESSAGE } from '../../keycloak/realm-gone.ts';
import type { TokenClient } from '../../keycloak/token-client.ts';
import { createGoneRealms, type GoneRealms } from '../gone-realms.ts';
import type { AuthMetrics } from '../auth-metrics.ts';
import { AuthFailure } from '../auth-failure.ts';
import type { Principal } from '../../tenancy/principal.ts';
import type { RevocationList } from '../revocation.ts';
import { systemClock, type Clock } from '../../time/clock.ts';
import { within } from '../../time/within.ts';
import type { Answer } from '../answer.ts';

export interface ActiveCheck {
  /**
   * Throws AuthFailure when Keycloak has said the token is no longer active. Nothing to wait
   * for (undefined) when it was checked within the interval; when its re-check is due, asks
   * Keycloak first and gives the promise of the answer (waited for up to the bound), which
   * rejects with that AuthFailure when the token is found inactive.
   */
  ensureActive(token: string, principal: Principal): Answer<void>;
}

/**
 * Introspections per second and at once, per replica. Beyond either, a due check is skipped
 * (the token served as verified) and tried by the token's next request: with many tokens the
 * interval stretches rather than the identity provider being flooded (each introspection costs
 * Keycloak real CPU). With an interval of 0 every request asks, so no cap applies.
 */
const MAX_CHECKS_PER_SECOND = 50;
const MAX_CHECKS_AT_ONCE = 8;

/**
 * Catches revocations made outside the gateway (a user disabled, sessions deleted in the
 * console): each distinct token is introspected at most once per `intervalSeconds` (`0`: on
 * every request; `off`: never). The request that finds its token due waits for Keycloak's
 * answer, up to `waitMs`: a token found inactive is refused on that very request, and from then
 * on, its session revoked on every replica. Keycloak slower than `waitMs` (counted `late`) or
 * unreachable (counted `failed`): the request is served on the local verification, as a
 * Keycloak outage must not become an API outage; a late answer still applies when it comes.
 * Concurrent requests of one due token share its one check. A token whose realm Keycloak says
 * it no longer has (deleted there while its key set is still held) is refused as the other
 * paths refuse it (realm_gone), and `gone` tells them: the realm's other tokens follow at once.
 */
export function createActiveCheck(options: {
  tokens: TokenClient;
  revocations: RevocationList;
  intervalSeconds: number | 'off';
  /** How long the request that finds a re-check due waits for it; 0: not at all. */
  waitMs: number;
  basicCacheSeconds: number;
  metrics: Pick<AuthMetrics, 'recheck'>;
  /** Realms Keycloak said it does not have, shared with the other paths that ask it. */
  gone?: GoneRealms;
  logger: Logger;
  clock?: Clock;
}): ActiveCheck {
  if (options.intervalSeconds === 'off') {
    return { ensureActive: () => undefined };
  }
  const intervalMs = options.intervalSeconds * 1000;
  const { clock = systemClock } = options;
  const gone = options.gone ?? createGoneRealms(clock);
  // The verifier hands out one principal object per cached token, so the object itself keys
  // these: no hash of the token, and entries vanish with the verifier's cache.
  const checkedUntil = new WeakMap<Principal, number>();
  const running = new WeakMap<Principal, Promise<boolean>>();
  const inactive = new WeakSet<Principal>();
  // Of those, the tokens whose realm was gone: refused naming it.
  const ofRealmGone = new WeakSet<Principal>();
  let runningCount = 0;
  let second = 0;
  let startedThisSecond = 0;

  /**
   * Whether another check may start now (see the limits above). A clock stepped back (NTP, a VM
   * restored) starts a new second: read as the old one, it skipped every check for the step.
   */
  function mayStart(now: number): boolean {
    if (intervalMs === 0) return true;
    if (now - second >= 1000 || now < second) {
      second = now;
      startedThisSecond = 0;
    }
    return runningCount < MAX_CHECKS_AT_ONCE && startedThisSecond < MAX_CHECKS_PER_SECOND;
  }

  /** Asks Keycloak; true when the token may be served. */
  async function check(token: string, principal: Principal): Promise<boolean> {
    try {
      const answer = await options.tokens.isActive(principal.realm, token);
      if (answer === REALM_GONE) {
        // No session of the realm is left to revoke: the realm's memory refuses its tokens.
        options.metrics.recheck('inactive');
        inactive.add(principal);
        ofRealmGone.add(principal);
        if (gone.sawGone(principal.realm)) {
          options.logger.warn(
            { realm: principal.realm },
            'Keycloak has no such realm: its tokens are refused',
          );
        }
        return false;
      }
      if (answer) {
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
    await options.revocations
      .revoke({
        realm: principal.realm,
        userId: principal.userId,
        sessionIds: principal.sessionId ? [principal.sessionId] : [],
        ttlSeconds: Math.max(principal.expiresAt - Math.floor(clock.now() / 1000), 1),
        userTtlSeconds: Math.max(options.basicCacheSeconds, 1),
      })
      .catch((err: unknown) => options.logger.error({ err }, 'revoking an inactive token failed'));
    return false;
  }

  /** Starts the token's check; undefined when the caps skip it (its next request tries again). */
  function start(token: string, principal: Principal): Promise<boolean> | undefined {
    const now = clock.now();
    if (!mayStart(now)) {
      options.metrics.recheck('skipped');
      return undefined;
    }
    checkedUntil.set(principal, now + intervalMs);
    runningCount++;
    startedThisSecond++;
    options.metrics.recheck('queued');
    const answer = check(token, principal).finally(() => {
      runningCount--;
      running.delete(principal);
    });
    running.set(principal, answer);
    return answer;
  }

  /** The answer, or true (served) when it takes longer than `waitMs`. */
  async function servedWithin(answer: Promise<boolean>): Promise<boolean> {
    if (options.waitMs === 0) return true;
    return within(answer, options.waitMs, () => {
      options.metrics.recheck('late');
      return true;
    });
  }

  const refused = (principal: Principal) =>
    ofRealmGone.has(principal)
      ? new AuthFailure('bearer', 'realm_gone', REALM_GONE_MESSAGE)
      : new AuthFailure('bearer', 'revoked', 'Token is no longer active.');

  return {
    ensureActive(token, principal) {
      if (inactive.has(principal)) throw refused(principal);
      let answer = running.get(principal);
      if (answer === undefined) {
        if ((checkedUntil.get(principal) ?? 0) > clock.now()) return undefined;
        answer = start(token, principal);
        if (answer === undefined) return undefined;
      }
      return servedWithin(answer).then((active) => {
        if (!active) throw refused(principal);
      });
    },
  };
}
