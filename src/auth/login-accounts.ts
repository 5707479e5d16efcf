import { createHmac, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { Cache } from '../cache/cache.ts';
import { TtlLru } from '../cache/ttl-lru.ts';
import { refusedThisRequestOnly } from '../keycloak/keycloak-failures.ts';
import { systemClock, type Clock } from '../time/clock.ts';
import { accountNameOf } from './account-name.ts';
import type { LoginThrottle, ThrottleDecision } from './login-throttle.ts';

/**
 * The account a login name names, or why it could not be told: the client address is refused
 * or busy at the throttle's limit per address (answer the attempt with that decision).
 */
export type AccountLookup =
  | {
      account: string;
      /**
       * Keycloak's admin API could not tell the account of the e-mail (now, or a few seconds
       * ago): `account` is the name as typed. Who must not let the account through unknown
       * (the bootstrap administrator's guard) refuses the attempt.
       */
      unresolved?: true;
    }
  | { refusal: Exclude<ThrottleDecision, { kind: 'go' }> };

export interface LoginAccounts {
  /**
   * The account `name` logs in to on `realm`, as the throttle, the failed-login memory and the
   * bootstrap administrator's rule key it (`accountNameOf` of its user name). Keycloak takes a
   * user's e-mail as its login name too where the realm lets it (`loginWithEmailAllowed`, on by
   * default), before user names, so there a name with `@` is the user name of the user with
   * that e-mail, when there is one; any other name, or any name where the realm does not, is its
   * own account.
   */
  accountOf(realm: string, name: string, address: string): Promise<AccountLookup>;
}

/** What the auth area keeps of the login accounts besides `LoginAccounts`. */
export interface ForgettingLoginAccounts extends LoginAccounts {
  /**
   * `realm` was deleted (its organization, through the gateway): what was told of its e-mails
   * and its `loginWithEmailAllowed` is dropped, here and in the shared cache, so that a realm
   * made again under the name (another tenant, perhaps its own users named as the old ones)
   * keys no e-mail login to the old realm's user of the name.
   */
  forgetRealm(realm: string): Promise<void>;
}

export interface LoginAccountsOptions {
  /** Shared with other replicas when it is Redis. */
  cache: Cache;
  /** Keys the entries, so e-mails are not stored in clear. */
  secret: string;
  /**
   * The user name of the one user of `realm` with the e-mail `email`, if there is one. Like
   * `loginWithEmailAllowed`, fails telling Keycloak's refusal (`refusedThisRequestOnly`) from
   * its absence.
   */
  usernameOfEmail: (realm: string, email: string) => Promise<string | undefined>;
  /** Whether Keycloak logs the users of `realm` in by e-mail (its `loginWithEmailAllowed`). */
  loginWithEmailAllowed: (realm: string) => Promise<boolean>;
  /**
   * Whether the gateway serves `realm` (master, or an organization that exists), as its key
   * sets are fetched: what the client at `address` names spends its share of the directory's
   * lookups. A realm it does not serve has no users of the gateway's to look up.
   */
  serves: (realm: string, address: string) => Promise<boolean>;
  /** Its limit per address bounds the lookups an address has in flight (see `accountOf`). */
  throttle: LoginThrottle;
  /** Bound of the in-process layer in front of `cache`. */
  maxLocalEntries: number;
  logger: Logger;
  clock?: Clock;
}

/**
 * How long an e-mail's account is kept: an e-mail moved to another user keys the old one's
 * count this long at most (an unknown e-mail, which may be given to a user, less long).
 */
const KNOWN_MS = 10 * 60_000;
const UNKNOWN_MS = 60_000;
/**
 * How long a realm whose lookup failed (Keycloak's admin API down, slow, or answering what is
 * no answer) is not asked again: its e-mails not known already (here or across replicas) are unresolved
 * meanwhile, so an outage costs one timeout per realm this often, not one per login.
 */
const FAILED_MS = 5_000;
/** When to ask again about an e-mail that was unresolved: the realm is asked again by then. */
export const UNRESOLVED_RETRY_SECONDS = FAILED_MS / 1000;
/** Bound of the realms whose failure, or `loginWithEmailAllowed`, is kept. */
const MAX_REALMS = 1_000;
/** How long a realm's `loginWithEmailAllowed` is kept. */
const REALM_SETTING_MS = 60_000;

/**
 * An e-mail's account in the shared cache, with the generation of its realm it was told in:
 * an entry of another generation than the realm's now (`generationKey`) is of a realm forgotten
 * since, and is not taken.
 */
const sharedEntry = z.object({ account: z.string(), generation: z.string() });

/**
 * Tells the account of a login name, asking Keycloak's admin API only for a name with `@`
 * whose account no replica has asked for lately. A lookup holds one of the budget of the
 * client address's limit while in flight (released, never counted), so an address past its
 * limit gets no lookup, and a burst of made-up e-mails has no more lookups in flight than the
 * limit lets it have password attempts. One e-mail has one lookup in flight per process: the
 * logins naming it meanwhile wait for its answer.
 */
export function createLoginAccounts(options: LoginAccountsOptions): ForgettingLoginAccounts {
  const { clock = systemClock } = options;
  // In front of the shared cache: a job logging in by e-mail costs one HMAC, no network.
  const local = new TtlLru<string>(options.maxLocalEntries, clock);
  const failed = new TtlLru<true>(MAX_REALMS, clock);
  const byEmail = new TtlLru<boolean>(MAX_REALMS, clock);
  // The lookup of each e-mail in flight, by its key: asked once however many wait for it.
  const inFlight = new Map<string, Promise<string | undefined>>();
  const mac = (text: string) =>
    createHmac('sha256', options.secret).update(text).digest('base64url');
  // Keycloak's realm names are case-sensitive: `ACME` is not `acme`, and what either is told
  // (an account, a failure, a setting) is no answer for the other. `login-account-of`: replicas
  // of an earlier version kept bare user names as `login-account`.
  const keyOf = (realm: string, email: string) =>
    `login-account-of:${mac(`${realm}\u0000${email}`)}`;
  /** The realm's generation ('' until it is first forgotten), as long as an entry lives. */
  const generationKey = (realm: string) => `login-account-realm:${mac(realm)}`;
  const generationOf = async (realm: string) =>
    (await options.cache.get(generationKey(realm))) ?? '';
  // How many realms this process forgot: what was read or looked up while one was is not kept.
  let forgets = 0;

  /**
   * Whether `realm` logs in by e-mail: a realm that does not takes an e-mail as a user name.
   * `since`: `forgets` when the lookup began (what it reads of a realm forgotten since is not kept).
   */
  async function logsInByEmail(realm: string, since: number): Promise<boolean> {
    const held = byEmail.get(realm);
    if (held !== undefined) return held;
    const allowed = await options.loginWithEmailAllowed(realm);
    if (forgets === since) byEmail.set(realm, allowed, clock.now() + REALM_SETTING_MS);
    return allowed;
  }

  async function lookUp(realm: string, email: string, since: number): Promise<string | undefined> {
    try {
      if (!(await logsInByEmail(realm, since))) return '';
      const username = await options.usernameOfEmail(realm, email);
      return username === undefined ? '' : accountNameOf(username);
    } catch (err) {
      options.logger.warn({ err }, 'could not look up the account of a login e-mail');
      // A lookup Keycloak refused for itself alone (a realm it does not have, a search it will
      // not run) tells nothing of the realm's other e-mails: only this login is unresolved,
      // nothing is kept; nor is a failure of a realm forgotten meanwhile (its organization
      // deleted). A refusal any lookup would get (the service session refused, Keycloak asking
      // to slow down) marks the realm.
      if (!refusedThisRequestOnly(err) && forgets === since) {
        failed.set(realm, true, clock.now() + FAILED_MS);
      }
      return undefined;
    }
  }

  /** The lookup of `email` in flight, started if none is: kept once answered. */
  function lookUpOnce(realm: string, email: string, key: string): Promise<string | undefined> {
    const pending = inFlight.get(key);
    if (pending) return pending;
    const started = (async () => {
      const before = forgets;
      // Read first: an answer of the realm deleted meanwhile is of the generation it ends.
      const generation = await generationOf(realm);
      const found = await lookUp(realm, email, before);
      if (found !== undefined && forgets === before) {
        const ttlMs = found ? KNOWN_MS : UNKNOWN_MS;
        local.set(key, found, clock.now() + ttlMs);
        await options.cache.set(key, JSON.stringify({ account: found, generation }), ttlMs);
      }
      return found;
    })().finally(() => {
      // A realm forgotten meanwhile may have another lookup of the e-mail in flight.
      if (inFlight.get(key) === started) inFlight.delete(key);
    });
    inFlight.set(key, started);
    return started;
  }

  /**
   * What is known of `key` without a new lookup: its account ('' none), here or in the shared
   * cache, or the answer of a lookup in flight; else undefined when its realm's lookups failed
   * lately (`FAILED_MS`); `ASK` when nothing is. An answer known stays known while the admin
   * API fails: only what would need it is unresolved.
   */
  async function known(realm: string, key: string): Promise<string | undefined | typeof ASK> {
    const here = () => local.get(key) ?? inFlight.get(key);
    const before = here();
    if (before !== undefined) return before;
    const forgotten = forgets;
    const shared = await sharedAccountOf(realm, key);
    if (shared !== undefined) {
      if (forgets === forgotten) {
        local.set(key, shared, clock.now() + (shared ? KNOWN_MS : UNKNOWN_MS));
      }
      return shared;
    }
    // Told meanwhile, by a lookup of this process.
    const after = here();
    if (after !== undefined) return after;
    return failed.get(realm) ? undefined : ASK;
  }

  /** The account the shared cache holds for `key`, if told in the realm's generation now. */
  async function sharedAccountOf(realm: string, key: string): Promise<string | undefined> {
    const [stored, generation] = await Promise.all([options.cache.get(key), generationOf(realm)]);
    const entry = stored === undefined ? undefined : parsedEntry(stored);
    return entry?.generation === generation ? entry.account : undefined;
  }

  const answer = (typed: string, found: string | undefined): AccountLookup =>
    found === undefined ? { account: typed, unresolved: true } : { account: found || typed };

  return {
    async accountOf(realm, name, address) {
      const typed = accountNameOf(name);
      if (!couldBeEmail(typed)) return { account: typed };
      // Any name in a URL: asked of Keycloak, each would cost a login of the gateway's service
      // account there (which Keycloak refuses) and keep its session.
      const served = await options.serves(realm, address).catch((err: unknown) => {
        options.logger.warn({ err }, 'could not tell whether a login e-mail names a served realm');
        return undefined;
      });
      if (served === undefined) return answer(typed, undefined);
      if (!served) return { account: typed };
      const key = keyOf(realm, typed);
      const before = await known(realm, key);
      if (before !== ASK) return answer(typed, before);
      const decision = await options.throttle.begin(realm, undefined, address);
      if (decision.kind !== 'go') return { refusal: decision };
      try {
        // Another login may have had it told while this one waited for the throttle.
        const after = await known(realm, key);
        return answer(typed, after !== ASK ? after : await lookUpOnce(realm, typed, key));
      } finally {
        await decision.attempt.settle('released');
      }
    },
    async forgetRealm(realm) {
      const forgetHere = () => {
        forgets++;
        // The realm's entries are not told apart from the others' here: all go (a rare event).
        local.clear();
        inFlight.clear();
        failed.delete(realm);
        byEmail.delete(realm);
      };
      // Here at once, and again once the realm's shared generation is new: what was read or
      // looked up meanwhile may be of the old one.
      forgetHere();
      try {
        await options.cache.set(generationKey(realm), randomUUID(), KNOWN_MS);
      } finally {
        forgetHere();
      }
    },
  };
}

/** A shared entry as `lookUpOnce` writes it, else undefined (a miss). */
function parsedEntry(stored: string): z.infer<typeof sharedEntry> | undefined {
  try {
    const parsed = sharedEntry.safeParse(JSON.parse(stored));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether `name` could be the e-mail of a Keycloak user: it has `@`, and at most 255 characters
 * (Keycloak's column) none of which is a control character. Any other name is asked of nobody:
 * Keycloak's admin API refuses some (a search too long for its request line), a lookup spent
 * on no account.
 */
function couldBeEmail(name: string): boolean {
  return name.includes('@') && /^[^\p{Cc}]{3,255}$/u.test(name);
}

/** `known`'s answer when nothing is known: the admin API is to be asked. */
const ASK = Symbol('ask');
