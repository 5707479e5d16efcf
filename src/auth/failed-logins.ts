import { createHmac } from 'node:crypto';
import type { Cache } from '../cache/cache.ts';
import { accountNameOf } from './account-name.ts';
import { systemClock, type Clock } from '../time/clock.ts';

/**
 * A login as the failed-login memory knows it: where it was tried (`basic`: a Basic login on
 * the API; `grant`: a password grant on the token endpoint) and what decides Keycloak's answer
 * besides the password (`extra`: the grant's client id and one-time password).
 */
export interface LoginCredentials {
  channel: 'basic' | 'grant';
  realm: string;
  username: string;
  password: string;
  extra?: string[];
}

export interface FailedLoginMemory {
  /**
   * The answer a refused login got, when the same credentials were refused within the window
   * and the account has not since succeeded with a new password; else undefined.
   */
  recall(login: LoginCredentials): Promise<string | undefined>;
  /**
   * Remembers what a refused login was answered, for the window. True when this is its first
   * refusal there (count it), false when an identical attempt was already counted.
   */
  remember(login: LoginCredentials, answer: string): Promise<boolean>;
  /**
   * A login of the account succeeded. The first success with a password in the window (the
   * account's password changed, or none succeeded before) drops its remembered failures: one of
   * them may be the new password. Further successes with the same password keep them.
   */
  succeeded(login: LoginCredentials): Promise<void>;
  /**
   * The account was given a new password through the gateway (its API): every failure it has
   * remembered is dropped, since the new password may be one of them.
   */
  passwordSet(realm: string, username: string): Promise<void>;
}

export interface FailedLoginMemoryOptions {
  /** Shared with other replicas when it is Redis. */
  cache: Cache;
  /** Keys every entry: no user name or password is stored, nor a plain hash of one. */
  secret: string;
  windowSeconds: number;
  clock?: Clock;
}

/**
 * The memory of recent failed logins that makes a repeated wrong password one failure: a job
 * looping on a stale password is answered from here, without asking Keycloak, and the throttle
 * counts it once per window.
 */
export function createFailedLoginMemory(options: FailedLoginMemoryOptions): FailedLoginMemory {
  const { clock = systemClock } = options;
  const now = () => clock.now();
  const windowMs = options.windowSeconds * 1000;
  const mac = (parts: string[]) =>
    createHmac('sha256', options.secret).update(JSON.stringify(parts)).digest('base64url');
  const accountOf = (login: Pick<LoginCredentials, 'realm' | 'username'>) => [
    login.realm,
    accountNameOf(login.username),
  ];
  const entryKey = (login: LoginCredentials) =>
    `failed-login:${mac([login.channel, ...accountOf(login), login.password, ...(login.extra ?? [])])}`;
  const successKey = (login: Pick<LoginCredentials, 'realm' | 'username'>) =>
    `login-ok:${mac(accountOf(login))}`;
  const passwordOf = (login: LoginCredentials) => mac([...accountOf(login), login.password]);

  /** The account's last new-password success (absent: none in the window). */
  async function lastSuccessOf(
    login: Pick<LoginCredentials, 'realm' | 'username'>,
  ): Promise<Success | undefined> {
    return parsed<Success>(await options.cache.get(successKey(login)), (value) =>
      typeof value.at === 'number' && typeof value.password === 'string' ? value : undefined,
    );
  }

  return {
    async recall(login) {
      const [stored, success] = await Promise.all([
        options.cache.get(entryKey(login)),
        lastSuccessOf(login),
      ]);
      const entry = parsed<Entry>(stored, (value) =>
        typeof value.at === 'number' && typeof value.answer === 'string' ? value : undefined,
      );
      if (!entry || (success && success.at >= entry.at)) return undefined;
      return entry.answer;
    },
    async remember(login, answer) {
      const key = entryKey(login);
      // Counted once per generation: a success with a new password starts another.
      const generation = (await lastSuccessOf(login))?.at ?? 0;
      const { count } = await options.cache.increment(`${key}:${generation}`, windowMs);
      const entry: Entry = { at: Math.max(now(), generation + 1), answer };
      await options.cache.set(key, JSON.stringify(entry), windowMs);
      return count === 1;
    },
    async succeeded(login) {
      const password = passwordOf(login);
      if ((await lastSuccessOf(login))?.password === password) return;
      const success: Success = { at: now(), password };
      await options.cache.set(successKey(login), JSON.stringify(success), windowMs);
    },
    async passwordSet(realm, username) {
      // As a success with a password not seen yet: failures remembered until now are dropped,
      // and the first login with the new password starts the next generation.
      const success: Success = { at: now(), password: '' };
      await options.cache.set(successKey({ realm, username }), JSON.stringify(success), windowMs);
    },
  };
}

interface Entry {
  /** When it was refused (epoch ms). */
  at: number;
  answer: string;
}

interface Success {
  at: number;
  /** HMAC of the password that succeeded. */
  password: string;
}

/** A JSON object of the expected shape, else undefined (an entry of an older replica is a miss). */
function parsed<T>(
  text: string | undefined,
  check: (value: Record<string, unknown>) => unknown,
): T | undefined {
  if (text === undefined) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== 'object' || value === null) return undefined;
    return (check(value as Record<string, unknown>) as T | undefined) ?? undefined;
  } catch {
    return undefined;
  }
}
