import { createHmac } from 'node:crypto';
import type { Cache } from '../../cache/cache.ts';

/** How an attempt `begin` let through ended; a refusal needs no call: it stays counted. */
export type AttemptOutcome = 'succeeded' | 'unanswered';

export interface LoginThrottle {
  /**
   * Counts a Basic login attempt against the account and the client address before it is made,
   * so a concurrent burst cannot slip past the limits. Resolves to 0 when the attempt may go
   * on, else the seconds until it may be tried again.
   */
  begin(realm: string, username: string, address: string): Promise<number>;
  /**
   * Takes back what `begin` counted for an attempt that did not fail: a login that succeeded
   * (the account also starts again from 0) or one Keycloak could not answer.
   */
  settle(realm: string, username: string, address: string, outcome: AttemptOutcome): Promise<void>;
}

export interface LoginThrottleOptions {
  /** Shared with other replicas when it is Redis, so they count together. */
  cache: Cache;
  /** Keys the account counters, so user names are not stored in clear. */
  secret: string;
  /** Failed logins per account per window before 429; 0 turns the account limit off. */
  maxFailuresPerUser: number;
  /** Failed logins per client address per window before 429; 0 turns that limit off. */
  maxFailuresPerAddress: number;
  windowSeconds: number;
  /** Told once per window and key, when an account or an address first goes past its limit. */
  onLimitReached?: (event: {
    scope: 'account' | 'address';
    realm: string;
    username: string;
    address: string;
  }) => void;
}

/**
 * Counts failed Basic logins per (realm, user name) and per client address in fixed windows;
 * past a limit, logins are refused for the rest of the window without asking Keycloak. This
 * keeps password guessing through the gateway slow, and keeps a burst of bad logins from
 * saturating Keycloak (each password check costs it real CPU). Logins the gateway has cached
 * are neither counted nor refused: they never reach Keycloak.
 */
export function createLoginThrottle(options: LoginThrottleOptions): LoginThrottle {
  const windowMs = options.windowSeconds * 1000;
  // Keycloak user names are case-insensitive: `Alice` and `alice` are one account.
  const userKey = (realm: string, username: string) =>
    `throttle:user:${createHmac('sha256', options.secret)
      .update(`${realm}\u0000${username.toLowerCase()}`)
      .digest('base64url')}`;
  const addressKey = (address: string) => `throttle:address:${address}`;

  /**
   * Counts one attempt under `key`; the seconds to wait when that goes past `limit`. The one
   * attempt that goes past it first (the counter is atomic, also across replicas) reports it.
   */
  async function count(key: string, limit: number, reached: () => void): Promise<number> {
    if (limit === 0) return 0;
    const counter = await options.cache.increment(key, windowMs);
    if (counter.count === limit + 1) reached();
    return counter.count > limit ? Math.max(1, Math.ceil(counter.ttlMs / 1000)) : 0;
  }

  async function takeBack(key: string, limit: number): Promise<void> {
    if (limit > 0) await options.cache.increment(key, windowMs, -1);
  }

  return {
    async begin(realm, username, address) {
      const reached = (scope: 'account' | 'address') => () =>
        options.onLimitReached?.({ scope, realm, username, address });
      const waits = await Promise.all([
        count(userKey(realm, username), options.maxFailuresPerUser, reached('account')),
        count(addressKey(address), options.maxFailuresPerAddress, reached('address')),
      ]);
      return Math.max(...waits);
    },
    async settle(realm, username, address, outcome) {
      const user = userKey(realm, username);
      await Promise.all([
        outcome === 'succeeded'
          ? options.maxFailuresPerUser > 0 && options.cache.delete(user)
          : takeBack(user, options.maxFailuresPerUser),
        takeBack(addressKey(address), options.maxFailuresPerAddress),
      ]);
    },
  };
}
