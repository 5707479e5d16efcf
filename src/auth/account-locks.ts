import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import { TtlLru } from '../cache/ttl-lru.ts';
import { systemClock, type Clock } from '../time/clock.ts';
import { accountNameOf } from './account-name.ts';
import type { LoginCredentials } from './failed-logins.ts';

/**
 * What besides its password refused a password login, as Keycloak's admin API tells it: a
 * one-time password the login lacks, or Keycloak's temporary brute-force lockout of the user
 * (`lockedUntil`: its end, epoch ms, when Keycloak tells it).
 */
export interface LoginBlock {
  twoFactor: boolean;
  lockedOut: boolean;
  lockedUntil?: number;
}

export interface AccountLocks {
  /**
   * What besides its password may have refused a login of `account` Keycloak refused for its
   * credentials: a lock noted (and not ended) is the answer while it is trusted
   * (`LOCK_TRUSTED_MS`), else the admin API is asked (once for concurrent callers) and a lockout
   * it tells is noted until its end, one it no longer tells forgotten. When it cannot tell,
   * nothing did (the refusal is a wrong password). `fresh`: the admin API is asked whatever is
   * noted (still once for concurrent callers).
   */
  blockOf(realm: string, account: string, fresh?: boolean): Promise<LoginBlock>;
  /** Whether a lockout noted of `account` lasts still (its end not passed on the clock). */
  isLocked(realm: string, account: string): boolean;
  /**
   * Whether this is the first refusal of `login` (its password and what else decides Keycloak's
   * answer) while the noted lock of its account lasts: a repeat is not counted again, as a wrong
   * password remembered is not, so a host whose jobs keep using the right password during the
   * lock is not throttled past it. True when no lock is noted (each refusal counts).
   */
  firstRefusal(login: LoginCredentials, answer?: string): boolean;
  /**
   * The answer (`answer` given to `firstRefusal`) of `login` refused already during the noted
   * lock of its account, while that lock lasts: a repeat need not reach Keycloak, which would
   * refuse it the same way (and, were the lock over, count it towards the next one).
   */
  refusedDuringLock(login: LoginCredentials): string | undefined;
  /** A login of `account` succeeded, or its lock was cleared: whatever was noted of it ends. */
  ended(realm: string, account: string): void;
}

export interface AccountLocksOptions {
  loginBlockOf: (realm: string, username: string) => Promise<LoginBlock>;
  /** Keys the logins refused during a lock: no password is kept, nor a plain hash of one. */
  secret: string;
  logger: Logger;
  clock?: Clock;
}

/** Bound of the accounts whose lock is noted at once, and of the logins refused during them. */
export const MAX_LOCKED_ACCOUNTS = 10_000;
/**
 * Longest a lock is noted, whatever end Keycloak tells (a permanent lockout tells none): its
 * default longest wait, past which one more grant learns the lock again.
 */
export const MAX_NOTED_MS = 15 * 60_000;

/**
 * How long a noted lock is taken on trust: past it, the next refusal-worthy login asks the admin
 * API again (once per account at a time), so a lock lifted early, on any replica or in Keycloak
 * directly, stops refusing within this time.
 */
export const LOCK_TRUSTED_MS = 10_000;

/**
 * How long a lock Keycloak tells is noted when the end it tells has passed on this clock.
 * Keycloak judges the end on its own clock: on a replica whose clock runs ahead of it by more
 * than the lock's remainder, it still locks, and the lock unnoted would cost a grant and two
 * admin calls per refusal, each repeat of the right password counted again. Noted as long as a
 * lock is trusted, it is read again after it.
 */
const PAST_END_NOTED_MS = LOCK_TRUSTED_MS;

/**
 * Keycloak's temporary lockouts, as its admin API told them on a refusal, in this process: while
 * one lasts Keycloak refuses every password of the account in the words of a wrong one, so a
 * new password tried meanwhile need not cost Keycloak a grant to be refused. Per realm and
 * account; no password is kept. The one reading of `loginBlockOf` for Basic logins and the token
 * endpoint's password grants.
 */
export function createAccountLocks(options: AccountLocksOptions): AccountLocks {
  const { clock = systemClock } = options;
  // Each noted lock's end (epoch ms).
  // Each noted lock: its end (epoch ms), and when the admin API last told it.
  const locks = new TtlLru<{ until: number; readAt: number }>(MAX_LOCKED_ACCOUNTS, clock);
  // The readings of the admin API in flight, per account: concurrent refusals share one.
  const reading = new Map<string, Promise<LoginBlock>>();
  // The logins refused while their account's lock lasts, until its end. One evicted early is
  // counted again: the stricter way.
  const refused = new TtlLru<string>(MAX_LOCKED_ACCOUNTS, clock);
  // Keycloak's realm names are case-sensitive, its user names not.
  const keyOf = (realm: string, account: string) => `${realm}\u0000${accountNameOf(account)}`;
  const loginKeyOf = (login: LoginCredentials) =>
    createHmac('sha256', options.secret)
      .update(JSON.stringify([login.channel, login.realm, accountNameOf(login.username)]))
      .update(JSON.stringify([login.password, ...(login.extra ?? [])]))
      .digest('base64url');

  async function read(realm: string, account: string, key: string): Promise<LoginBlock> {
    let block: LoginBlock;
    try {
      block = await options.loginBlockOf(realm, account);
    } catch (err) {
      options.logger.warn({ err }, 'could not tell what besides its password refused a login');
      // A read that failed is no unlock: a lock noted lasts, trusted another while (else a right
      // password refused meanwhile would be taken for a wrong one, and remembered past the lock).
      const noted = locks.get(key);
      if (noted === undefined) return { twoFactor: false, lockedOut: false };
      locks.set(key, { until: noted.until, readAt: clock.now() }, noted.until);
      return { twoFactor: false, lockedOut: true, lockedUntil: noted.until };
    }
    const now = clock.now();
    const until =
      block.lockedOut && block.lockedUntil !== undefined
        ? Math.min(
            block.lockedUntil > now ? block.lockedUntil : now + PAST_END_NOTED_MS,
            now + MAX_NOTED_MS,
          )
        : 0;
    // A lock lifted early (or one the admin API cannot tell) is noted no longer.
    if (until > now) locks.set(key, { until, readAt: now }, until);
    else locks.delete(key);
    return block;
  }

  return {
    blockOf(realm, account, fresh = false) {
      const key = keyOf(realm, account);
      // The refusal of a password tried while the lock lasts (one whose login is kept, or a
      // grant on the token endpoint) costs no admin calls, for as long as the lock is trusted.
      const noted = locks.get(key);
      if (!fresh && noted && clock.now() - noted.readAt < LOCK_TRUSTED_MS) {
        return Promise.resolve({ twoFactor: false, lockedOut: true });
      }
      let block = reading.get(key);
      if (!block) {
        block = read(realm, account, key).finally(() => reading.delete(key));
        reading.set(key, block);
      }
      return block;
    },
    isLocked: (realm, account) => locks.get(keyOf(realm, account)) !== undefined,
    firstRefusal(login, answer = '') {
      const noted = locks.get(keyOf(login.realm, login.username));
      if (noted === undefined) return true;
      const key = loginKeyOf(login);
      if (refused.get(key) !== undefined) return false;
      refused.set(key, answer, noted.until);
      return true;
    },
    refusedDuringLock(login) {
      if (locks.get(keyOf(login.realm, login.username)) === undefined) return undefined;
      return refused.get(loginKeyOf(login));
    },
    ended(realm, account) {
      locks.delete(keyOf(realm, account));
    },
  };
}
