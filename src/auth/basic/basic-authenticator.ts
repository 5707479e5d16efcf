import { createHmac } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Cache } from '../../cache/cache.ts';
import { TtlLru } from '../../cache/ttl-lru.ts';
import type { TokenClient } from '../../keycloak/token-client.ts';
import { AuthFailure } from '../auth-failure.ts';
import type { BearerVerifier } from '../bearer/bearer-verifier.ts';
import type { Principal } from '../../tenancy/principal.ts';
import type { RevocationList } from '../revocation.ts';
import { AppError } from '../../envelope/errors.ts';
import type { AuthMetrics } from '../auth-metrics.ts';
import type { LoginThrottle } from '../login-throttle.ts';
import type { BasicCredentials } from './parse-basic.ts';

export interface BasicAuthenticator {
  /**
   * Logs the credentials in on `realm`; throws AuthFailure, AppError 429 while `clientAddress`
   * or the account is throttled, or AppError when Keycloak fails.
   */
  authenticate(
    realm: string,
    credentials: BasicCredentials,
    clientAddress: string,
  ): Promise<Principal>;
  /**
   * The principal of a login this process has cached and may still reuse, without waiting;
   * undefined whenever only `authenticate` can tell (the shared cache, a login, a refusal).
   */
  cached(realm: string, credentials: BasicCredentials): Principal | undefined;
}

export interface BasicAuthenticatorDeps {
  tokens: TokenClient;
  bearer: BearerVerifier;
  cache: Cache;
  /** HMAC key naming cache entries; without it a cache entry could be brute-forced offline. */
  cacheSecret: string;
  /** Longest reuse of a login; bounds how late a password change or disabled user takes effect. */
  maxCacheSeconds: number;
  /** Bound of the in-process layer in front of `cache`. */
  maxLocalEntries: number;
  /** How long a refused login is remembered (0: not at all); a loop on a bad password then costs no grant. */
  refusalCacheSeconds: number;
  /**
   * How long one replica may hold a cold login for the others (see `logIn`); past it, another
   * replica logs in itself. A little above the longest a login takes before giving up.
   */
  loginLockMs: number;
  throttle: LoginThrottle;
  /** Accounts whose password is never tried here (Keycloak's bootstrap administrator). */
  refuses: (realm: string, username: string) => boolean;
  /** A user's sessions revoked after a login was cached make the cached login void. */
  revocations: RevocationList;
  /** Tells whether a user has two-factor authentication (for a helpful 401 message). */
  hasTwoFactor: (realm: string, username: string) => Promise<boolean>;
  metrics: Pick<AuthMetrics, 'cacheLookup'>;
  logger: Logger;
}

/**
 * Basic authentication as a Keycloak password grant on the realm's API client. A successful
 * login is cached under HMAC-SHA256(secret, realm, user, password): never the password, never a
 * plain hash of it; a refused one briefly too, under its own prefix. Concurrent identical logins
 * share one attempt. Attempts are counted by the throttle, which answers 429 past its limits
 * without asking Keycloak.
 */
export function createBasicAuthenticator(deps: BasicAuthenticatorDeps): BasicAuthenticator {
  const inFlight = new Map<string, Promise<Principal>>();
  // In front of the shared cache: a warm Basic request then costs one HMAC and no network.
  // An entry keeps the deadline it got when stored, so BASIC_CACHE_MAX_SECONDS still bounds it.
  const local = new TtlLru<CachedLogin>(deps.maxLocalEntries);

  return {
    async authenticate(realm, credentials, clientAddress) {
      const key = cacheKeyOf(deps.cacheSecret, realm, credentials);
      const cached = await readCache(key);
      deps.metrics.cacheLookup('basic_login', cached !== undefined);
      if (cached) return cached;
      if (deps.refuses(realm, credentials.username)) {
        throw new AuthFailure(
          'basic',
          'account_refused',
          'This account cannot use Basic authentication.',
        );
      }
      let login = inFlight.get(key);
      if (!login) {
        login = attempt(realm, credentials, key, clientAddress).finally(() => inFlight.delete(key));
        inFlight.set(key, login);
      }
      return login;
    },
    cached(realm, credentials) {
      if (deps.maxCacheSeconds === 0) return undefined;
      const key = cacheKeyOf(deps.cacheSecret, realm, credentials);
      const login = local.get(key);
      return login && reusable(key, login);
    },
  };

  async function readCache(key: string): Promise<Principal | undefined> {
    if (deps.maxCacheSeconds === 0) return undefined;
    let login = local.get(key);
    if (!login) {
      const value = await deps.cache.get(key);
      if (!value) return undefined;
      login = JSON.parse(value) as CachedLogin;
      // An entry of another shape (e.g. from an older replica during an upgrade) is a miss.
      if (typeof login.until !== 'number' || typeof login.principal?.expiresAt !== 'number') {
        return undefined;
      }
      local.set(key, login, login.until);
    }
    return reusable(key, login);
  }

  /** The login's principal while within its bounds and not voided by a revocation. */
  function reusable(key: string, login: CachedLogin): Principal | undefined {
    const { principal } = login;
    if (login.until <= Date.now() || principal.expiresAt * 1000 <= Date.now()) return undefined;
    const revokedAt = deps.revocations.userRevokedAt(principal.realm, principal.userId);
    // A login whose Keycloak session was ended (a console's session delete) logs in afresh
    // rather than being refused: the password is still good.
    const sessionEnded =
      principal.sessionId !== undefined && deps.revocations.isSessionRevoked(principal.sessionId);
    if (sessionEnded || (revokedAt !== undefined && revokedAt > principal.issuedAt * 1000)) {
      local.delete(key);
      return undefined;
    }
    return principal;
  }

  /**
   * One login attempt, shared by identical concurrent requests (so a cold burst of one user's
   * requests is one attempt, not a burst of failures): counted by the throttle first, refused
   * with 429 past its limits, taken back unless it failed.
   */
  async function attempt(
    realm: string,
    credentials: BasicCredentials,
    key: string,
    clientAddress: string,
  ): Promise<Principal> {
    const { username } = credentials;
    const wait = await deps.throttle.begin(realm, username, clientAddress);
    if (wait > 0) {
      throw new AppError('tooManyFailedLogins', { headers: { 'retry-after': String(wait) } });
    }
    try {
      const principal = await logIn(realm, credentials, key);
      await deps.throttle.settle(realm, username, clientAddress, 'succeeded');
      return principal;
    } catch (err) {
      // A refusal stays counted; an attempt Keycloak could not answer is taken back.
      if (!(err instanceof AuthFailure)) {
        await deps.throttle.settle(realm, username, clientAddress, 'unanswered');
      }
      throw err;
    }
  }

  /**
   * A login through Keycloak, once across replicas: the first replica to take a short lock in
   * the shared cache asks Keycloak, the others wait for its cached login or refusal. When the
   * lock is released without either (Keycloak failed, nothing is cached) or held too long, a
   * waiting replica asks Keycloak itself. Without Redis the lock is per process, where
   * identical logins already share one attempt.
   */
  async function logIn(
    realm: string,
    credentials: BasicCredentials,
    key: string,
  ): Promise<Principal> {
    const refusedKey = `refused:${key}`;
    const remembered = rememberedRefusal(await deps.cache.get(refusedKey));
    if (remembered) throw remembered;
    if (deps.maxCacheSeconds === 0) return grant(realm, credentials, key, refusedKey);
    const lockKey = `login-lock:${key}`;
    const holders = await deps.cache
      .increment(lockKey, deps.loginLockMs)
      .then(({ count }) => count)
      .catch(() => 1);
    if (holders === 1) {
      try {
        return await grant(realm, credentials, key, refusedKey);
      } finally {
        await deps.cache.delete(lockKey).catch(() => undefined);
      }
    }
    const elsewhere = await loginOfAnotherReplica(key, refusedKey, lockKey);
    if (elsewhere instanceof AuthFailure) throw elsewhere;
    return elsewhere ?? grant(realm, credentials, key, refusedKey);
  }

  /** What the replica holding the login lock found, once it has; undefined if nothing usable. */
  async function loginOfAnotherReplica(
    key: string,
    refusedKey: string,
    lockKey: string,
  ): Promise<Principal | AuthFailure | undefined> {
    const deadline = Date.now() + deps.loginLockMs;
    const outcome = async () =>
      (await readCache(key)) ?? rememberedRefusal(await deps.cache.get(refusedKey));
    while (Date.now() < deadline) {
      await sleep(LOCK_POLL_MS);
      const found = await outcome();
      if (found) return found;
      // Released: the holder stored its outcome just before, or had none to store.
      if ((await deps.cache.counter(lockKey)) === undefined) return outcome();
    }
    return undefined;
  }

  async function grant(
    realm: string,
    credentials: BasicCredentials,
    key: string,
    refusedKey: string,
  ): Promise<Principal> {
    const result = await deps.tokens.passwordGrant(
      realm,
      credentials.username,
      credentials.password,
    );
    if (!result.ok) {
      const failure = await refusal(realm, credentials.username, result.description);
      if (deps.refusalCacheSeconds > 0) {
        await deps.cache.set(refusedKey, failure.reason, deps.refusalCacheSeconds * 1000);
      }
      throw failure;
    }
    const principal = {
      ...(await deps.bearer.verify(realm, result.accessToken)),
      method: 'basic' as const,
    };
    const ttlMs = Math.floor(
      Math.min(deps.maxCacheSeconds * 1000, principal.expiresAt * 1000 - Date.now()),
    );
    if (ttlMs > 0) {
      const login: CachedLogin = { principal, until: Date.now() + ttlMs };
      local.set(key, login, login.until);
      await deps.cache.set(key, JSON.stringify(login), ttlMs);
    }
    return principal;
  }

  async function refusal(
    realm: string,
    username: string,
    description: string,
  ): Promise<AuthFailure> {
    // Keycloak says "Invalid user credentials" both for a wrong password and a missing OTP.
    const twoFactor = await deps.hasTwoFactor(realm, username).catch((err: unknown) => {
      deps.logger.warn({ err }, 'could not tell whether the user has two-factor authentication');
      return false;
    });
    if (twoFactor) return loginRefused('two_factor');
    return loginRefused(/disabled/i.test(description) ? 'account_disabled' : 'wrong_password');
  }
}

/** How often a replica waiting for another one's login looks at the shared cache. */
const LOCK_POLL_MS = 20;

/** What the client is told when Keycloak refuses a password grant, by reason. */
const REFUSAL_MESSAGES = {
  wrong_password: 'Invalid user name or password.',
  account_disabled: 'Account disabled.',
  two_factor:
    'Users with two-factor authentication cannot use Basic; obtain a token and use Bearer.',
} as const;

type LoginRefusalReason = keyof typeof REFUSAL_MESSAGES;

function loginRefused(reason: LoginRefusalReason): AuthFailure {
  return new AuthFailure('basic', reason, REFUSAL_MESSAGES[reason]);
}

/**
 * A refusal remembered in the cache (its reason), or undefined. Anything else, such as an entry
 * written by an older replica, counts as not remembered: the login is simply tried.
 */
function rememberedRefusal(value: string | undefined): AuthFailure | undefined {
  return value !== undefined && Object.hasOwn(REFUSAL_MESSAGES, value)
    ? loginRefused(value as LoginRefusalReason)
    : undefined;
}

/** A cached login, with the moment (epoch ms) the cache must forget it. */
interface CachedLogin {
  principal: Principal;
  until: number;
}

/** The cache key of a Basic login; NUL separators keep (a, bc) and (ab, c) apart. */
export function cacheKeyOf(secret: string, realm: string, credentials: BasicCredentials): string {
  const mac = createHmac('sha256', secret)
    .update(`${realm}\u0000${credentials.username}\u0000${credentials.password}`)
    .digest('base64url');
  return `basic:${mac}`;
}
