import { createHmac } from 'node:crypto';
import type { Cache } from '../../cache/cache.ts';

export interface LoginThrottle {
  /**
   * Seconds until a Basic login may be tried again for this account or from this address;
   * 0 when it may be tried now.
   */
  retryAfter(realm: string, username: string, address: string): Promise<number>;
  /** Counts a refused login against the account and the address. */
  failed(realm: string, username: string, address: string): Promise<void>;
  /** A successful login clears the account's count (the address keeps its own). */
  succeeded(realm: string, username: string): Promise<void>;
}

export interface LoginThrottleOptions {
  /** Shared with other replicas when it is Redis, so they count together. */
  cache: Cache;
  /** Keys the account counters, so user names are not stored in clear. */
  secret: string;
  /** Refused logins per account per window before 429; 0 turns the account limit off. */
  maxFailuresPerUser: number;
  /** Refused logins per client address per window before 429; 0 turns that limit off. */
  maxFailuresPerAddress: number;
  windowSeconds: number;
}

/**
 * Counts refused Basic logins per (realm, user name) and per client address in fixed windows;
 * past a limit, logins are refused for the rest of the window without asking Keycloak. This
 * keeps password guessing through the gateway slow and keeps a burst of bad logins from
 * saturating Keycloak (each password check costs it real CPU). Logins the gateway has cached
 * are not counted or refused here: they never reach Keycloak.
 */
export function createLoginThrottle(options: LoginThrottleOptions): LoginThrottle {
  const windowMs = options.windowSeconds * 1000;
  // Keycloak user names are case-insensitive: `Alice` and `alice` are one account.
  const userKey = (realm: string, username: string) =>
    `throttle:user:${createHmac('sha256', options.secret)
      .update(`${realm}\u0000${username.toLowerCase()}`)
      .digest('base64url')}`;
  const addressKey = (address: string) => `throttle:address:${address}`;

  async function wait(key: string, limit: number): Promise<number> {
    if (limit === 0) return 0;
    const counter = await options.cache.counter(key);
    return counter && counter.count >= limit ? Math.max(1, Math.ceil(counter.ttlMs / 1000)) : 0;
  }

  return {
    async retryAfter(realm, username, address) {
      const [user, client] = await Promise.all([
        wait(userKey(realm, username), options.maxFailuresPerUser),
        wait(addressKey(address), options.maxFailuresPerAddress),
      ]);
      return Math.max(user, client);
    },
    async failed(realm, username, address) {
      await Promise.all([
        options.maxFailuresPerUser > 0 &&
          options.cache.increment(userKey(realm, username), windowMs),
        options.maxFailuresPerAddress > 0 && options.cache.increment(addressKey(address), windowMs),
      ]);
    },
    async succeeded(realm, username) {
      if (options.maxFailuresPerUser > 0) await options.cache.delete(userKey(realm, username));
    },
  };
}
