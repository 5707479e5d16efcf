import { createHmac } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { Cache } from '../../cache/cache.ts';
import { TtlLru } from '../../cache/ttl-lru.ts';
import { failureOf, keycloakError } from '../../keycloak/keycloak-failures.ts';
import type { PasswordGrantResult, TokenClient } from '../../keycloak/token-client.ts';
import { REALM_GONE_MESSAGE } from '../../keycloak/realm-gone.ts';
import { AuthFailure } from '../auth-failure.ts';
import { AppError } from '../../envelope/errors.ts';
import { MASTER_REALM } from '../../tenancy/identifiers.ts';
import type { GoneRealms } from '../gone-realms.ts';
import type { BearerVerifier } from '../bearer/bearer-verifier.ts';
import type { Principal } from '../../tenancy/principal.ts';
import type { RevocationList } from '../revocation.ts';
import type { AuthMetrics } from '../auth-metrics.ts';
import type { FailedLoginMemory, LoginCredentials } from '../failed-logins.ts';
import { UNRESOLVED_RETRY_SECONDS, type LoginAccounts } from '../login-accounts.ts';
import type { LoginThrottle } from '../login-throttle.ts';
import type { AccountLocks } from '../account-locks.ts';
import { throttleRefusal } from '../throttle-refusal.ts';
import type { BasicCredentials } from './parse-basic.ts';
import { whenKnown, type Answer } from '../answer.ts';
import {
  cachedLoginOf,
  longestServedSeconds,
  parseCachedLogin,
  type CachedLogin,
} from './cached-login.ts';
import { systemClock, type Clock } from '../../time/clock.ts';
import { addressGroupOf } from '../../edge/address-group.ts';

export interface BasicAuthenticator {
  /**
   * Logs the credentials in on `realm`: the principal at once when this process holds a fresh
   * login of them, else a promise. Throws (or rejects with) AuthFailure, AppError 429 while
   * `clientAddress` or the account is throttled, or AppError when Keycloak fails.
   */
  authenticate(
    realm: string,
    credentials: BasicCredentials,
    clientAddress: string,
  ): Answer<Principal>;
}

export interface BasicAuthenticatorDeps {
  tokens: TokenClient;
  bearer: BearerVerifier;
  cache: Cache;
  /** HMAC key naming cache entries; without it a cache entry could be brute-forced offline. */
  cacheSecret: string;
  /** Longest reuse of a login; bounds how late a password change or disabled user takes effect. */
  maxCacheSeconds: number;
  /**
   * How long after its grant a cached login is still served while no Keycloak node can be
   * reached (see cached-login.ts); 0 or at most `maxCacheSeconds`: no longer than that.
   */
  maxOutageSeconds: number;
  /**
   * True while every Keycloak node is known to be unreachable (a call or probe failed to reach
   * it, and no probe has answered since): kept logins are then served without trying a grant.
   */
  keycloakDown: () => boolean;
  /**
   * How long after a re-check of a kept login timed out (a Keycloak slow to grant, though it
   * answers its probe) kept logins are served without trying a grant: the grant's timeout, so
   * a slow Keycloak costs one request's wait in each such period, not every request's.
   */
  slowGrantPauseMs: number;
  /** Bound of the in-process layer in front of `cache`. */
  maxLocalEntries: number;
  /** Wrong passwords refused within the throttle's window: a repeat is answered from there. */
  failedLogins: FailedLoginMemory;
  /**
   * The account a login name names (a user's e-mail names the user's): what the throttle and
   * the failed-login memory count and keep, asked once the login is not cached.
   */
  accounts: LoginAccounts;
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
  /**
   * Tells whether a user has two-factor authentication (for a helpful 401 message) and whether
   * Keycloak's brute-force detection locks the user for now (a refusal that says nothing of the
   * password), and keeps the lock's end: until then a password not known to be right is refused
   * without a grant.
   */
  locks: Pick<AccountLocks, 'blockOf' | 'isLocked' | 'firstRefusal' | 'ended'>;
  metrics: Pick<AuthMetrics, 'cacheLookup'>;
  /**
   * Realms Keycloak said it does not have (shared with the Bearer paths): their logins are
   * refused from there, without a grant, cached ones included.
   */
  gone: GoneRealms;
  logger: Logger;
  /** The cached logins' deadlines and the login lock's bound are read on it. */
  clock?: Clock;
}

/**
 * Basic authentication as a Keycloak password grant on the realm's API client. A successful
 * login is cached under HMAC-SHA256(secret, realm, user, password): never the password, never a
 * plain hash of it; a wrong password is remembered by the failed-login memory, so a repeat is
 * refused without Keycloak and counted once. Concurrent identical logins share one attempt.
 * Failures are counted by the throttle, which answers 429 past its limits without asking
 * Keycloak.
 */
/** Bound of the realms whose re-checks are paused at once (see `grantsPaused`). */
const MAX_PAUSED_REALMS = 10_000;

export function createBasicAuthenticator(deps: BasicAuthenticatorDeps): BasicAuthenticator {
  const { clock = systemClock } = deps;
  const inFlight = new Map<string, Promise<Principal>>();
  // Refusals Keycloak gave this process that count as failures (see `counting`).
  const counted = new WeakSet<object>();
  // In front of the shared cache: a warm Basic request then costs one HMAC and no network.
  // An entry keeps the deadlines it got when stored, so BASIC_CACHE_MAX_SECONDS still bounds it.
  const local = new TtlLru<CachedLogin>(deps.maxLocalEntries, clock);
  const bounds = { cacheSeconds: deps.maxCacheSeconds, outageSeconds: deps.maxOutageSeconds };
  // The realms whose kept logins are served without a grant, after one of theirs timed out, until
  // the entry's end: per realm, as a realm slow to grant (a slow user federation) says nothing
  // of the others, whose password changes a re-check would see.
  const grantsPaused = new TtlLru<true>(MAX_PAUSED_REALMS, clock);

  return {
    authenticate(realm, credentials, clientAddress) {
      if (deps.gone.isGone(realm)) throw realmGone();
      // The login's one HMAC: every step below finds it under this key.
      const key = cacheKeyOf(deps.cacheSecret, realm, credentials);
      return whenKnown(readCache(realm, key), (cached) => {
        deps.metrics.cacheLookup('basic_login', cached !== undefined);
        return cached ?? logInOnce(realm, credentials, key, clientAddress);
      });
    },
  };

  /**
   * A login through Keycloak, shared by identical concurrent requests from one address group
   * (see `attempt`): an attempt carries its group's throttle decision, which is not another
   * host's. Across groups and replicas the login lock still makes it one grant (`logIn`).
   */
  function logInOnce(
    realm: string,
    credentials: BasicCredentials,
    key: string,
    clientAddress: string,
  ): Promise<Principal> {
    if (deps.refuses(realm, credentials.username)) throw accountRefused();
    const flight = `${key}\u0000${addressGroupOf(clientAddress)}`;
    let login = inFlight.get(flight);
    if (!login) {
      login = attempt(realm, credentials, key, clientAddress).finally(() =>
        inFlight.delete(flight),
      );
      inFlight.set(flight, login);
    }
    return login;
  }

  /**
   * A cached login's principal while it is fresh (at once when this process holds it), or,
   * while Keycloak is known to be down or a re-check timed out lately, kept (`keptUntil`).
   * Otherwise a login past `until` goes to Keycloak (grant), which verifies it afresh.
   */
  function readCache(realm: string, key: string): Answer<Principal | undefined> {
    return whenKnown(storedLogin(key), (login) => {
      if (!login) return undefined;
      const fresh = reusable(key, login, login.until);
      const unverifiable = deps.keycloakDown() || grantsPaused.get(realm) !== undefined;
      return fresh || !unverifiable ? fresh : keptLogin(key);
    });
  }

  /** The login cached under `key`, in this process (at once) or the shared cache, fresh or kept. */
  function storedLogin(key: string): Answer<CachedLogin | undefined> {
    if (deps.maxCacheSeconds === 0) return undefined;
    const login = local.get(key);
    if (login) return login;
    return deps.cache.get(key).then((value) => {
      const shared = value === undefined ? undefined : parseCachedLogin(value);
      if (shared) local.set(key, shared, shared.keptUntil);
      return shared;
    });
  }

  /** The login's principal until `deadline` (epoch ms), unless a revocation voided it. */
  function reusable(key: string, login: CachedLogin, deadline: number): Principal | undefined {
    const { principal } = login;
    if (deadline <= clock.now() || principal.expiresAt * 1000 <= clock.now()) return undefined;
    const revokedAt = deps.revocations.userRevokedAt(principal.realm, principal.userId);
    // A login whose Keycloak session was ended (a console's session delete) logs in afresh
    // rather than being refused: the password is still good.
    const sessionEnded =
      principal.sessionId !== undefined &&
      deps.revocations.isSessionRevoked(principal.realm, principal.sessionId);
    if (
      sessionEnded ||
      (revokedAt !== undefined && revokedAt > principal.issuedAt * 1000) ||
      // A role it carries was deleted since: it logs in again, with the roles of now.
      deps.revocations.carriesEndedRole(principal)
    ) {
      local.delete(key);
      return undefined;
    }
    return principal;
  }

  /**
   * One login attempt, shared by identical concurrent requests (so a cold burst of one user's
   * requests is one attempt, not a burst of failures). A wrong password refused before is
   * refused again from memory, uncounted; otherwise the attempt holds a reservation of the
   * throttle (429 once the failures reach a limit), which its refusal turns into a failure.
   */
  async function attempt(
    realm: string,
    credentials: BasicCredentials,
    key: string,
    clientAddress: string,
  ): Promise<Principal> {
    const found = await deps.accounts.accountOf(realm, credentials.username, clientAddress);
    if ('refusal' in found) throw throttleRefusal(found.refusal);
    // An e-mail may name the bootstrap administrator too; one whose account the admin API could
    // not tell may be his, so in master it does not reach Keycloak either, where its failures
    // would count towards locking the break-glass account (as on /auth: bootstrap-admin-guard.ts).
    if (deps.refuses(realm, found.account)) throw accountRefused();
    if (found.unresolved && realm === MASTER_REALM) throw unresolvedAccount();
    const login = loginOf(realm, credentials, found.account);
    const remembered = rememberedRefusal(await deps.failedLogins.recall(login));
    if (remembered) throw remembered;
    const decision = await deps.throttle.begin(realm, found.account, clientAddress);
    if (decision.kind !== 'go') throw throttleRefusal(decision);
    try {
      if (deps.locks.isLocked(realm, found.account)) await refuseWhileLocked(key, login);
      const principal = await logIn(realm, credentials, key, login, found.unresolved === true);
      deps.locks.ended(realm, found.account);
      await Promise.all([decision.attempt.settle('succeeded'), deps.failedLogins.succeeded(login)]);
      return principal;
    } catch (err) {
      // A refusal this attempt got from Keycloak is a failure, unless an identical one was
      // counted already; one found in memory or one Keycloak could not answer is not.
      await decision.attempt.settle(counted.has(err as object) ? 'failed' : 'released');
      throw err;
    }
  }

  /**
   * While Keycloak locks the account (its end as told on a refusal: account-locks.ts), every
   * password would be refused in a wrong one's words, so one not known right is refused so here,
   * without a grant and its two admin calls, and counted as Keycloak's refusal would be: guesses
   * from many addresses cost Keycloak nothing more. A password whose login is kept (it logged
   * in lately) still goes to Keycloak: an administrator may have lifted the lock early, and the
   * owner's jobs must not wait out a lock that is gone; so does any once the lock, read again,
   * is gone.
   */
  async function refuseWhileLocked(key: string, login: LoginCredentials): Promise<void> {
    if (await keptLogin(key)) return;
    // A lock noted a while ago is read again (one admin read, not a grant): one lifted early,
    // on another replica or in Keycloak, stops refusing there within LOCK_TRUSTED_MS.
    if (!(await deps.locks.blockOf(login.realm, login.username)).lockedOut) return;
    const failure = loginRefused('wrong_password');
    if (deps.locks.firstRefusal(login)) counted.add(failure);
    throw failure;
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
    login: LoginCredentials,
    unresolved: boolean,
  ): Promise<Principal> {
    if (deps.maxCacheSeconds === 0) return grant(realm, credentials, key, login, unresolved);
    const lockKey = `login-lock:${key}`;
    const holders = await deps.cache
      .increment(lockKey, deps.loginLockMs)
      .then(({ count }) => count)
      .catch(() => 1);
    if (holders === 1) {
      try {
        // A login another replica (or host) finished between this request's reads and the lock
        // is found, not repeated: its cached login, or its refusal (a slow machine may decide
        // this attempt's throttle only after the holder before it was refused and let go): each
        // grant more is one more failure Keycloak counts towards locking the account.
        const found = await readCache(realm, key);
        if (found) return found;
        const refused = rememberedRefusal(await deps.failedLogins.recall(login));
        if (refused) throw refused;
        return await grant(realm, credentials, key, login, unresolved);
      } finally {
        await deps.cache.delete(lockKey).catch(() => undefined);
      }
    }
    const elsewhere = await loginOfAnotherReplica(key, login, lockKey);
    if (elsewhere instanceof AuthFailure) throw elsewhere;
    return elsewhere ?? grant(realm, credentials, key, login, unresolved);
  }

  /** What the replica holding the login lock found, once it has; undefined if nothing usable. */
  async function loginOfAnotherReplica(
    key: string,
    login: LoginCredentials,
    lockKey: string,
  ): Promise<Principal | AuthFailure | undefined> {
    const deadline = clock.now() + deps.loginLockMs;
    const outcome = async () =>
      (await readCache(login.realm, key)) ??
      rememberedRefusal(await deps.failedLogins.recall(login));
    while (clock.now() < deadline) {
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
    login: LoginCredentials,
    unresolved: boolean,
  ): Promise<Principal> {
    let result: PasswordGrantResult;
    try {
      result = await deps.tokens.passwordGrant(realm, credentials.username, credentials.password);
    } catch (err) {
      // Keycloak cannot be reached (not a refusal, not a bad answer): the same credentials
      // verified before are served while kept, as a kept key set serves Bearer tokens.
      const failure = failureOf(err);
      const kept =
        failure === 'unreachable' || failure === 'timeout' ? await keptLogin(key) : undefined;
      // A node that timed out but answers its probe stays up: without the pause, every request
      // of a kept login would wait the grant's timeout again.
      if (kept && failure === 'timeout') {
        grantsPaused.set(realm, true, clock.now() + deps.slowGrantPauseMs);
      }
      if (kept) return kept;
      throw err;
    }
    if (!result.ok) {
      if (result.realmGone) {
        await endKeptLogin(key);
        if (deps.gone.sawGone(realm)) {
          deps.logger.warn({ realm }, 'Keycloak has no such realm: its Basic logins are refused');
        }
        throw realmGone();
      }
      // The account's user name: a login by e-mail names no user as `username`. One whose
      // account the admin API could not tell names none at all: it is not asked about (a
      // wrong password's refusal, as on the token endpoint).
      const { failure, lockedOut } = await refusal(
        realm,
        unresolved ? undefined : login.username,
        result.description,
      );
      // Keycloak's temporary lockout refuses the right password too, in the same words: such a
      // refusal says nothing of the password. It is answered as Keycloak answers while the lock
      // lasts, but not remembered, and the login kept for an outage stays: once the lock ends,
      // the right password logs in again, on every replica, from every address. It is counted
      // as any refusal (this account from this address): the guess that brought the lock about
      // sees it too, and guesses must not go uncounted while the owner is locked out; a repeat
      // during the lock is not counted again (a host's jobs on the right password).
      if (lockedOut) {
        if (deps.locks.firstRefusal(login)) counted.add(failure);
        throw failure;
      }
      await endKeptLogin(key);
      throw await counting(failure, login);
    }
    deps.gone.sawServed(realm);
    // Keycloak grants the realm again: its logins past `until` are verified again at once.
    grantsPaused.delete(realm);
    const principal = basicPrincipalOf(
      await deps.bearer.verify(realm, result.accessToken),
      result.proofKey,
    );
    const now = clock.now();
    const cached = cachedLoginOf(principal, bounds, now);
    if (cached) {
      local.set(key, cached, cached.keptUntil);
      await deps.cache.set(key, JSON.stringify(cached), Math.ceil(cached.keptUntil - now));
    }
    return principal;
  }

  /**
   * A definitive refusal ends a kept login, outage or not: this process's copy, and other
   * replicas' and workers' through a mark in the shared cache that outlives their copies.
   */
  async function endKeptLogin(key: string): Promise<void> {
    if (local.get(key) !== undefined || (await deps.cache.get(key)) !== undefined) {
      await deps.cache.set(key, ENDED_LOGIN, Math.max(longestServedSeconds(bounds), 1) * 1000);
    }
    local.delete(key);
  }

  /**
   * Marks a refusal Keycloak gave to count as a failure: a wrong password is remembered (before
   * the login lock is released, so waiting replicas find it) and counted the first time only.
   */
  async function counting(failure: AuthFailure, login: LoginCredentials): Promise<AuthFailure> {
    const first =
      failure.reason !== 'wrong_password' ||
      (await deps.failedLogins.remember(login, failure.reason));
    if (first) counted.add(failure);
    return failure;
  }

  /**
   * The principal of a login kept for an outage under `key`, unless a refusal on any replica or
   * worker ended it (see grant): the shared copy, else this process's own (the shared cache may
   * have lost it, e.g. a Redis restarted empty).
   */
  async function keptLogin(key: string): Promise<Principal | undefined> {
    const value = await deps.cache.get(key);
    if (value === ENDED_LOGIN) {
      local.delete(key);
      return undefined;
    }
    const login = (value === undefined ? undefined : parseCachedLogin(value)) ?? local.get(key);
    return login && reusable(key, login, login.keptUntil);
  }

  /**
   * What a refusal of Keycloak's is answered, and whether Keycloak's lockout of the user made it
   * (then the password may well be right: `lockedOut`). Keycloak says "Invalid user credentials"
   * for a wrong password, a missing OTP and a locked user alike; the client is told no more
   * about a lockout than Keycloak tells. When the admin API cannot tell, or the login's account
   * is not known (`username` undefined), it is a wrong password.
   */
  async function refusal(
    realm: string,
    username: string | undefined,
    description: string,
  ): Promise<{ failure: AuthFailure; lockedOut: boolean }> {
    const block =
      username === undefined
        ? { twoFactor: false, lockedOut: false }
        : await deps.locks.blockOf(realm, username);
    if (block.twoFactor) return { failure: loginRefused('two_factor'), lockedOut: false };
    const reason = /disabled/i.test(description) ? 'account_disabled' : 'wrong_password';
    return { failure: loginRefused(reason), lockedOut: block.lockedOut };
  }
}

/**
 * The principal of a Basic login from its token's: a token bound to a key is taken only when it
 * is bound to the gateway's own (the key whose proof went with the grant, if one went); the binding stays
 * here, as the token does (a cached login is the principal, served by any replica).
 */
function basicPrincipalOf(verified: Principal, proofKey: string | undefined): Principal {
  const { boundKey, ...principal } = verified;
  if (boundKey !== undefined && boundKey !== proofKey) {
    throw keycloakError('bad_answer', new Error('the login token is bound to another key'));
  }
  return { ...principal, method: 'basic' };
}

/**
 * What the shared cache holds under a login Keycloak refused after it was cached: never served
 * again. JSON, so that a replica of an older version reads it as an entry of another shape.
 */
const ENDED_LOGIN = JSON.stringify({ ended: true });

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

/** The login's realm does not exist in Keycloak (deleted there): the client's problem. */
function realmGone(): AuthFailure {
  return new AuthFailure('basic', 'realm_gone', REALM_GONE_MESSAGE);
}

function loginRefused(reason: LoginRefusalReason): AuthFailure {
  return new AuthFailure('basic', reason, REFUSAL_MESSAGES[reason]);
}

/**
 * A refusal remembered by the failed-login memory (its reason), or undefined. Anything else
 * counts as not remembered: the login is simply tried.
 */
function rememberedRefusal(value: string | undefined): AuthFailure | undefined {
  return value !== undefined && Object.hasOwn(REFUSAL_MESSAGES, value)
    ? loginRefused(value as LoginRefusalReason)
    : undefined;
}

/** A Basic login as the failed-login memory knows it: by its account (`accountOf`). */
function loginOf(realm: string, credentials: BasicCredentials, account: string): LoginCredentials {
  return { channel: 'basic', realm, username: account, password: credentials.password };
}

/** A login by e-mail in master whose account Keycloak's admin API could not tell now. */
function unresolvedAccount(): AppError {
  return new AppError('identityProviderUnavailable', {
    message: 'Could not tell the account of this e-mail; retry later.',
    headers: { 'retry-after': String(UNRESOLVED_RETRY_SECONDS) },
  });
}

function accountRefused(): AuthFailure {
  return new AuthFailure(
    'basic',
    'account_refused',
    'This account cannot use Basic authentication.',
  );
}

/** The cache key of a Basic login; NUL separators keep (a, bc) and (ab, c) apart. */
export function cacheKeyOf(secret: string, realm: string, credentials: BasicCredentials): string {
  const mac = createHmac('sha256', secret)
    .update(`${realm}\u0000${credentials.username}\u0000${credentials.password}`)
    .digest('base64url');
  return `basic:${mac}`;
}
