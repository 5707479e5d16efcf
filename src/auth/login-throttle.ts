import { createHmac } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cache } from '../cache/cache.ts';
import { accountNameOf } from './account-name.ts';
import { addressGroupOf } from '../edge/address-group.ts';
import { systemClock, type Clock } from '../time/clock.ts';

/**
 * How an attempt ended: `failed` (Keycloak refused the password: one more failure),
 * `succeeded` (the pair's failures start again from 0) or `released` (nothing to count: Keycloak
 * could not answer, or the refusal was one already counted).
 */
export type AttemptOutcome = 'failed' | 'succeeded' | 'released';

/** What a limit is counted on: one account from one address, or one address for every account. */
export type ThrottleScope = 'account_address' | 'address';

/** A password attempt that holds one of the budget left; settle it exactly once. */
export interface ReservedAttempt {
  settle: (outcome: AttemptOutcome) => Promise<void>;
}

/**
 * What `begin` decided: go on, refused (the failures are there: `scope` says which limit,
 * `retryAfter` the seconds until its window ends), or `busy` (the budget left is held by
 * attempts still in flight past the wait bound: Keycloak is that slow).
 */
export type ThrottleDecision =
  | { kind: 'go'; attempt: ReservedAttempt }
  | { kind: 'refused'; scope: ThrottleScope; retryAfter: number }
  | { kind: 'busy'; retryAfter: number };

export interface LoginThrottle {
  /**
   * Reserves one of the failures still allowed to the account from this client address and to
   * the address, so that failures and attempts in flight together never exceed the limits,
   * across replicas. Without budget left it waits (at most `waitMs`) for attempts in flight to
   * settle; it refuses only when the failures themselves reach a limit. `username` undefined:
   * a guess whose account the gateway cannot tell (a login page posting no user name), counted
   * against the address's limit only.
   */
  begin(realm: string, username: string | undefined, address: string): Promise<ThrottleDecision>;
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
  /**
   * Longest an attempt beyond the budget waits for those in flight before it is decided (the
   * gateway: `attemptMaxMs`, as long as they may take; then `busy` means a replica died holding).
   */
  waitMs: number;
  /**
   * Longest an attempt can be in flight (every Keycloak call it makes, timed out). A
   * reservation counts for at least this long and at most twice it, so one left by a replica
   * that died mid-login frees itself.
   */
  attemptMaxMs: number;
  /**
   * Told once per window and key, when the failures of a pair or an address reach its limit
   * (`username`: the attempt's that reached it, empty when it named none).
   */
  onLimitReached?: (event: {
    scope: ThrottleScope;
    realm: string;
    username: string;
    address: string;
    /**
     * What the limit counts (edge/address-group.ts): the address, an IPv6 address's /64
     * (`2001:db8:1:2::/64`), or the IPv4 address an IPv6 one carries (`64:ff9b::192.0.2.7`).
     */
    addressGroup: string;
  }) => void;
  /** The cache must use the same clock. */
  clock?: Clock;
  /** Pause between looks at the shared counters while waiting; settlements here wake at once. */
  pause?: (ms: number) => Promise<void>;
}

/** How often a waiting attempt looks again for settlements of other replicas. */
const WAIT_POLL_MS = 250;

/**
 * Counts failed password attempts per (realm, user name, client address) and per client
 * address, in fixed windows; once the failures reach a limit, attempts are refused for the
 * rest of the window without asking Keycloak. Only failures count: an attempt holds a
 * reservation while in flight (so a concurrent burst of guesses cannot slip past), which a
 * success or an unanswered attempt gives back and a refusal turns into a failure. One address
 * can never lock an account for another (Keycloak's own lockout is the backstop against
 * guessing spread over many addresses; see platform/realm-admin/brute-force.ts). It also keeps
 * a burst of bad logins from saturating Keycloak (each password check costs it real CPU).
 */
export function createLoginThrottle(options: LoginThrottleOptions): LoginThrottle {
  const { clock = systemClock } = options;
  const now = () => clock.now();
  const pause = options.pause ?? ((ms: number) => sleep(ms));
  const windowMs = options.windowSeconds * 1000;
  const slotMs = options.attemptMaxMs;
  // Settlements in this process wake its waiters at once; other replicas' are polled.
  const wakers = new Set<() => void>();
  const wakeAll = () => {
    for (const wake of wakers) wake();
    wakers.clear();
  };

  // An IPv6 client by its /64, which one host owns and can draw a new address from for every
  // guess (edge/address-group.ts).
  const limitsOf = (realm: string, username: string | undefined, group: string): Limit[] => {
    const perAddress: Limit = {
      scope: 'address',
      key: `address:${group}`,
      max: options.maxFailuresPerAddress,
    };
    if (username === undefined) return [perAddress];
    const pair = createHmac('sha256', options.secret)
      .update(`${realm.toLowerCase()}\u0000${accountNameOf(username)}\u0000${group}`)
      .digest('base64url');
    return [
      { scope: 'account_address', key: `pair:${pair}`, max: options.maxFailuresPerUserAndAddress },
      perAddress,
    ];
  };

  /**
   * Reservations are counted in time slots of `attemptMaxMs`: one made in slot s counts while
   * slots s - 1 to s + 1 are read, then is forgotten (its attempt has ended by then).
   */
  const heldKey = (limit: Limit, slot: number) => `throttle:held:${limit.key}:${slot}`;
  const failuresKey = (limit: Limit) => `throttle:${limit.key}`;

  /** Takes one of the budget of `limit`, or says why not (refused: the failures are there). */
  async function reserve(limit: Limit): Promise<number | { refusedFor?: number }> {
    const slot = Math.floor(now() / slotMs);
    const { count: mine } = await options.cache.increment(heldKey(limit, slot), 3 * slotMs);
    const [before, after, failures] = await Promise.all([
      options.cache.counter(heldKey(limit, slot - 1)),
      // Near a slot's end, an attempt that began just after this one, in the next slot, may
      // reach the shared cache first (from another replica) and not see this reservation:
      // this one must see that one.
      options.cache.counter(heldKey(limit, slot + 1)),
      options.cache.counter(failuresKey(limit)),
    ]);
    const failed = failures?.count ?? 0;
    const held = mine + (before?.count ?? 0) + (after?.count ?? 0);
    if (failed + held <= limit.max) return slot;
    await options.cache.increment(heldKey(limit, slot), 3 * slotMs, -1);
    return failed >= limit.max ? { refusedFor: secondsOf(failures!.ttlMs) } : {};
  }

  async function release(limit: Limit, slot: number): Promise<void> {
    // Past slot + 2 nobody reads it any more; before, its key (3 slots long) still exists.
    if (now() < (slot + 2) * slotMs) {
      await options.cache.increment(heldKey(limit, slot), 3 * slotMs, -1);
    }
  }

  /** One try at every limit: all reserved, or none (what was taken is given back). */
  async function tryAll(
    limits: Limit[],
  ): Promise<Map<Limit, number> | { refusedFor?: number; scope?: ThrottleScope }> {
    const taken = new Map<Limit, number>();
    for (const limit of limits) {
      const slot = await reserve(limit);
      if (typeof slot !== 'number') {
        await Promise.all([...taken].map(([held, at]) => release(held, at)));
        return { ...slot, scope: limit.scope };
      }
      taken.set(limit, slot);
    }
    return taken;
  }

  /** Until an attempt of this process settles, or `ms` have passed. */
  async function settlementOrPause(ms: number): Promise<void> {
    let wake = () => {};
    const woken = new Promise<void>((resolve) => {
      wake = resolve;
      wakers.add(resolve);
    });
    await Promise.race([pause(ms), woken]);
    wakers.delete(wake);
  }

  return {
    async begin(realm, username, address) {
      const addressGroup = addressGroupOf(address);
      const limits = limitsOf(realm, username, addressGroup).filter((limit) => limit.max > 0);
      const deadline = now() + options.waitMs;
      for (;;) {
        const tried = await tryAll(limits);
        if (tried instanceof Map) {
          const who = { realm, username: username ?? '', address, addressGroup };
          return { kind: 'go', attempt: reservedAttempt(tried, who) };
        }
        if (tried.refusedFor !== undefined) {
          return { kind: 'refused', scope: tried.scope!, retryAfter: tried.refusedFor };
        }
        const left = deadline - now();
        if (left <= 0) return { kind: 'busy', retryAfter: secondsOf(slotMs) };
        await settlementOrPause(Math.min(left, WAIT_POLL_MS));
      }
    },
  };

  function reservedAttempt(
    held: Map<Limit, number>,
    who: { realm: string; username: string; address: string; addressGroup: string },
  ): ReservedAttempt {
    let settled = false;
    return {
      async settle(outcome) {
        if (settled) return;
        settled = true;
        try {
          await Promise.all(
            [...held].map(async ([limit, slot]) => {
              // The failure is counted before the reservation is given back, so no one sees
              // neither.
              if (outcome === 'failed') {
                const { count } = await options.cache.increment(failuresKey(limit), windowMs);
                if (count === limit.max) options.onLimitReached?.({ scope: limit.scope, ...who });
              }
              if (outcome === 'succeeded' && limit.scope === 'account_address') {
                await options.cache.delete(failuresKey(limit));
              }
              await release(limit, slot);
            }),
          );
        } finally {
          wakeAll();
        }
      },
    };
  }
}

interface Limit {
  scope: ThrottleScope;
  /** Names the counters (an HMAC for a pair: no user name in clear). */
  key: string;
  /** Failures per window; 0: no limit. */
  max: number;
}

function secondsOf(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
