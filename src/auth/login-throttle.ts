import { createHmac } from 'node:crypto';
import type { Cache } from '../cache/cache.ts';

/** How an attempt `begin` let through ended; a refusal needs no call: it stays counted. */
export type AttemptOutcome = 'succeeded' | 'unanswered';

/** What a limit is counted on: one account from one address, or one address for every account. */
export type ThrottleScope = 'account_address' | 'address';

export interface LoginThrottle {
  /**
   * Counts a password attempt (a Basic login or a password grant) against the account from
   * this client address, and against the address, before it is made, so a concurrent burst
   * cannot slip past the limits. Resolves to 0 when the attempt may go on, else the seconds
   * until it may be tried again.
   */
  begin(realm: string, username: string, address: string): Promise<number>;
  /**
   * Takes back what `begin` counted for an attempt that did not fail: a login that succeeded
   * (the account starts again from 0 at this address) or one Keycloak could not answer.
   */
  settle(realm: string, username: string, address: string, outcome: AttemptOutcome): Promise<void>;
}

export interface LoginThrottleOptions {
  /** Shared with other replicas when it is Redis, so they count together. */
  cache: Cache;
  /** Keys the counters, so user names are not stored in clear. */
  secret: string;
  /** Failed logins of one account from one address per window before 429; 0: no limit. */
  maxFailuresPerUserAndAddress: number;
  /** Failed logins from one address, whatever the account, per window before 429; 0: no limit. */
  maxFailuresPerAddress: number;
  windowSeconds: number;
  /** Told once per window and key, when a pair or an address first goes past its limit. */
  onLimitReached?: (event: {
    scope: ThrottleScope;
    realm: string;
    username: string;
    address: string;
  }) => void;
}

/**
 * Counts failed password attempts per (realm, user name, client address) and per client
 * address, in fixed windows; past a limit, attempts are refused for the rest of the window
 * without asking Keycloak. Guessing through the gateway stays slow, while one address can
 * never lock an account for the others: an automation job looping on an old password blocks
 * itself, not the account's owner elsewhere (Keycloak's own per-account lockout is the backstop
 * against guessing spread over many addresses; see platform/realm-admin/brute-force.ts). It
 * also keeps a burst of bad logins from saturating Keycloak (each password check costs it real
 * CPU).
 */
export function createLoginThrottle(options: LoginThrottleOptions): LoginThrottle {
  const windowMs = options.windowSeconds * 1000;
  // Keycloak user names are case-insensitive and trimmed: ` Alice` and `alice` are one account; so is the
  // realm in a path, for the counter's sake.
  const pairKey = (realm: string, username: string, address: string) =>
    `throttle:pair:${createHmac('sha256', options.secret)
      .update(`${realm.toLowerCase()}\u0000${username.trim().toLowerCase()}\u0000${address}`)
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
      const reached = (scope: ThrottleScope) => () =>
        options.onLimitReached?.({ scope, realm, username, address });
      const waits = await Promise.all([
        count(
          pairKey(realm, username, address),
          options.maxFailuresPerUserAndAddress,
          reached('account_address'),
        ),
        count(addressKey(address), options.maxFailuresPerAddress, reached('address')),
      ]);
      return Math.max(...waits);
    },
    async settle(realm, username, address, outcome) {
      const pair = pairKey(realm, username, address);
      const limit = options.maxFailuresPerUserAndAddress;
      await Promise.all([
        outcome === 'succeeded' ? limit > 0 && options.cache.delete(pair) : takeBack(pair, limit),
        takeBack(addressKey(address), options.maxFailuresPerAddress),
      ]);
    },
  };
}
