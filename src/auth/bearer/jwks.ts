import { errors as joseErrors, type JWTVerifyGetKey } from 'jose';
import type { Logger } from 'pino';
import { outsideRequest } from '../../edge/request-context.ts';
import type { KeycloakCalls } from '../../keycloak/keycloak-calls.ts';
import { failureOf } from '../../keycloak/keycloak-failures.ts';
import { createLocalKeySetMemory, type KeySetMemory } from './key-set-memory.ts';
import { refreshDelayMs, UNKNOWN_KID_GAP_MS } from './key-set-schedule.ts';
import { isRealmGone } from '../../keycloak/realm-gone.ts';
import { createGoneRealms, type GoneRealms } from '../gone-realms.ts';
import { readKeySet, tryReadKeySet } from './read-key-set.ts';
import { systemClock, type Clock } from '../../time/clock.ts';

/** A realm's key set as last fetched, and the fetches around it. */
interface RealmKeys {
  /** jose's selection over the set (by `kid`, `use: sig` only); undefined before the first fetch. */
  select?: JWTVerifyGetKey;
  /** The `kid`s of the set's signature keys: what a remembered token's key is checked against. */
  kids: ReadonlySet<string>;
  /** When the last fetch started (ms), for the gap between fetches an unknown kid may cause. */
  startedAt: number;
  /** When the fetch whose set is held started (ms): this process's, or a sibling worker's. */
  heldFrom: number;
  running?: Promise<void>;
  /** A fetch waiting for the gap to pass; every unknown kid that arrives meanwhile joins it. */
  queued?: Promise<void>;
  /** The last fetch's failure (cleared by the next good one): the last good set stays. */
  failure?: Error;
  /** Whether a token of the realm was verified or recognised since the last scheduled fetch. */
  used: boolean;
  idleSince: number;
  timer?: ReturnType<typeof setTimeout>;
}

/** A realm whose tokens nobody showed for this long is forgotten (its next token fetches it). */
const IDLE_MS = 10 * 60_000;

/** What the fetch of a realm Keycloak does not have reads. */
const REALM_GONE = Symbol('realm gone');

/**
 * A token of a realm the gateway does not serve (no such organization): refused before any key
 * set is fetched. A kind of "no matching key", so every verifier refuses it as one.
 */
export class RealmNotServed extends joseErrors.JWKSNoMatchingKey {}

/**
 * A token of a realm Keycloak said it does not have (deleted there while the organization
 * stays): no key can verify it, and the verifier tells the client why (realm-gone.ts).
 */
export class RealmGone extends joseErrors.JWKSNoMatchingKey {}

/**
 * The key set of each realm in use, fetched from Keycloak through the client layer (its
 * failures are the layer's 503/504/502) and verified against locally with jose's
 * `createLocalJWKSet`. What a removed key means, and how soon, is decided here:
 *
 * - each realm in use is fetched again every `refreshSeconds` (less a random part of up to a
 *   fifth, so realms and workers spread out): a key Keycloak no longer publishes stops
 *   verifying, remembered tokens included (`publishes`), within `refreshSeconds` plus a fetch;
 * - a token whose `kid` is not in the set waits for a fetch that starts after it arrived (a
 *   key just added), coalesced per realm and at most one per `UNKNOWN_KID_GAP_MS`: random kids
 *   cost Keycloak one key-set fetch per realm and second at most;
 * - `refresh(realm)` fetches now (a key provider changed, or an operator asked);
 * - a failed fetch keeps the last good set: an outage refuses no valid token. A realm this
 *   process never fetched falls back to `memory` (the set a sibling worker fetched last), only
 *   when Keycloak cannot be reached or did not answer in time; a bad answer is never replaced;
 * - a realm this process does not hold is fetched only if `serves` says the gateway serves it
 *   (master, or an organization that exists), asked with the client's address: tokens naming
 *   made-up realms (a logout token's `iss`, a revoked token through `/auth`) cost Keycloak
 *   nothing, and the directory's lookups only within the client's share;
 * - a realm Keycloak says it does not have (deleted), here or on another path (a Basic login,
 *   a re-check: `gone`), is dropped, its schedule with it, and logged once: its tokens are
 *   refused without a fetch while `gone` remembers it (REALM_GONE_MEMORY_MS); after that, its
 *   next token starts over (a realm created again under the name works).
 */
export function createJwksRegistry(options: {
  calls: Pick<KeycloakCalls, 'exchange'>;
  refreshSeconds: number;
  /** Whether the gateway serves `realm` (asked for a realm not held); every realm if absent. */
  serves?: (realm: string, client: string | undefined) => boolean | Promise<boolean>;
  memory?: KeySetMemory;
  /** Realms Keycloak said it does not have, shared with the other paths that ask it. */
  gone?: GoneRealms;
  logger?: Logger;
  clock?: Clock;
  random?: () => number;
}) {
  const { calls, memory = createLocalKeySetMemory(), logger } = options;
  const { clock = systemClock } = options;
  const now = () => clock.now();
  const random = options.random ?? Math.random;
  const realms = new Map<string, RealmKeys>();
  const gone = options.gone ?? createGoneRealms(clock);
  // Whichever path heard it, no key of a realm gone verifies a token any more.
  gone.onGone((realm) => {
    const state = realms.get(realm);
    if (state) drop(realm, state);
  });
  let closed = false;
  memory.onSiblingFetch?.((realm, body, startedAt) => adoptSiblings(realm, body, startedAt));

  function stateOf(realm: string): RealmKeys {
    let state = realms.get(realm);
    if (!state) {
      state = {
        kids: new Set(),
        startedAt: -Infinity,
        heldFrom: -Infinity,
        used: true,
        idleSince: now(),
      };
      realms.set(realm, state);
      schedule(realm, state);
    }
    return state;
  }

  /**
   * The next background fetch, `refreshDelayMs` after the start of the last fetch whose set this
   * process holds (`from`); a realm idle for IDLE_MS is dropped instead.
   */
  function schedule(realm: string, state: RealmKeys, from = now()): void {
    // A realm dropped meanwhile (idle, or gone from Keycloak) is not fetched again.
    if (closed || realms.get(realm) !== state) return;
    clearTimeout(state.timer);
    // Created outside any request: the fetches it chains serve none (no request id on them).
    state.timer = outsideRequest(() =>
      setTimeout(
        () => {
          if (state.used) state.idleSince = now();
          state.used = false;
          if (now() - state.idleSince >= IDLE_MS) {
            realms.delete(realm);
            return;
          }
          void fetchAfter(realm, state, now()).finally(() =>
            schedule(realm, state, state.startedAt),
          );
        },
        // Due at once (not a negative delay, which Node warns of) when the interval has passed
        // since `from`: a fetch slower than the interval, a clock moved on.
        Math.max(0, refreshDelayMs(options.refreshSeconds, random) - (now() - from)),
      ),
    );
    state.timer.unref();
  }

  /**
   * A set a sibling worker just fetched: adopted for a realm in use here, with this process's
   * next fetch counted from that fetch's start, so the bound holds and the workers share one
   * fetch per interval. Not while a fetch of this process's own is due to answer.
   */
  function adoptSiblings(realm: string, body: string, startedAt: number): void {
    const state = realms.get(realm);
    if (!state || state.running || state.queued || startedAt <= state.heldFrom) return;
    const set = tryReadKeySet(body);
    if (!set) return;
    ({ select: state.select, kids: state.kids } = set);
    state.heldFrom = startedAt;
    state.failure = undefined;
    schedule(realm, state, startedAt);
  }

  /**
   * A fetch that starts at `arrival` or later: the running one if it did, else the next. A
   * running fetch whose start lies ahead of now began before the clock stepped back, whenever
   * the caller arrived: it may answer with a set from before the caller's key.
   */
  function fetchAfter(realm: string, state: RealmKeys, arrival: number): Promise<void> {
    if (state.running && state.startedAt >= arrival && state.startedAt <= now()) {
      return state.running;
    }
    state.queued ??= (async () => {
      await state.running;
      // Never more than the gap: a clock stepped back (NTP, a VM restored) would make the last
      // fetch's start lie ahead, and a new key wait for the step.
      const gap = Math.min(state.startedAt + UNKNOWN_KID_GAP_MS - now(), UNKNOWN_KID_GAP_MS);
      if (gap > 0) await new Promise((resolve) => setTimeout(resolve, gap));
      state.queued = undefined;
      return state.running ?? start(realm, state);
    })();
    return state.queued;
  }

  function start(realm: string, state: RealmKeys): Promise<void> {
    state.startedAt = now();
    state.running = fetchKeySet(realm, state).finally(() => (state.running = undefined));
    return state.running;
  }

  /** Fetches and adopts the set; never rejects (the failure is kept in `state.failure`). */
  async function fetchKeySet(realm: string, state: RealmKeys): Promise<void> {
    const path = `/realms/${encodeURIComponent(realm)}/protocol/openid-connect/certs`;
    try {
      const set = await calls.exchange('jwks', path, undefined, (status, body) =>
        isRealmGone(status, body) ? REALM_GONE : readKeySet(status, body),
      );
      if (set === REALM_GONE) {
        drop(realm, state);
        if (gone.sawGone(realm)) {
          logger?.warn(
            { realm },
            'Keycloak has no such realm: its key set is dropped, its tokens refused',
          );
        }
        return;
      }
      ({ select: state.select, kids: state.kids } = set);
      state.heldFrom = state.startedAt;
      memory.remember(realm, set.body, state.startedAt);
      state.failure = undefined;
      gone.sawServed(realm);
    } catch (err) {
      // The client layer rejects with its AppError (503/504/502).
      state.failure = err instanceof Error ? err : new Error(String(err));
      logger?.warn({ err, realm }, 'key set fetch failed; the last good set stays');
      if (state.select || failureOf(err) === 'bad_answer') return;
      const kept = await memory.recall(realm);
      // Checked when it was kept; a set that no longer reads is no set.
      const set = kept === undefined ? undefined : tryReadKeySet(kept);
      if (set) ({ select: state.select, kids: state.kids } = set);
    }
  }

  /**
   * Keycloak does not have the realm (deleted): no key verifies its tokens (those waiting for
   * this fetch included), and its schedule stops.
   */
  function drop(realm: string, state: RealmKeys): void {
    state.select = undefined;
    state.kids = new Set();
    state.failure = undefined;
    clearTimeout(state.timer);
    if (realms.get(realm) === state) realms.delete(realm);
  }

  /** Which key verifies a token: the set's, once a fetch that started after it arrived is over. */
  async function selectKey(
    realm: string,
    client: string | undefined,
    ...args: Parameters<JWTVerifyGetKey>
  ) {
    const arrival = now();
    if (options.serves && !realms.has(realm) && !(await options.serves(realm, client))) {
      throw new RealmNotServed();
    }
    // Keycloak said lately that the realm does not exist: refused without asking it again, however
    // many tokens come; once the memory has passed, the next token fetches (a realm created
    // again under the name verifies it).
    if (!realms.has(realm) && gone.isGone(realm)) throw new RealmGone();
    const state = stateOf(realm);
    state.used = true;
    const kid = args[0].kid;
    if (typeof kid !== 'string') throw new joseErrors.JWKSNoMatchingKey();
    if (!state.kids.has(kid)) {
      await fetchAfter(realm, state, arrival);
      if (!state.kids.has(kid) && state.failure !== undefined) throw state.failure;
    }
    if (!state.select) {
      if (state.failure) throw state.failure;
      throw gone.isGone(realm) ? new RealmGone() : new joseErrors.JWKSNoMatchingKey();
    }
    return state.select(...args);
  }

  return {
    /**
     * The key selection jose's `jwtVerify` takes for a token of `realm`; `client`, the address
     * of the client that sent it, spends its own share of the lookups `serves` may make.
     */
    keySetFor(realm: string, client?: string): JWTVerifyGetKey {
      return (...args) => selectKey(realm, client, ...args);
    },
    /**
     * Whether the set held now publishes `kid`, without a promise (the verified-token fast
     * path): false makes the verifier verify the token again, which fetches when it must.
     */
    publishes(realm: string, kid: string): boolean {
      const state = realms.get(realm);
      if (!state) return false;
      state.used = true;
      return state.kids.has(kid);
    },
    /**
     * Fetches the realm's key set now (within UNKNOWN_KID_GAP_MS of the last fetch); from its
     * return on, only keys Keycloak publishes verify. Never rejects: a failed fetch keeps the
     * last good set, and `failureOf(realm)` tells.
     */
    refresh(realm: string): Promise<void> {
      return fetchAfter(realm, stateOf(realm), now());
    },
    /** The failure of the realm's last fetch, undefined when it succeeded. */
    lastFailure(realm: string): Error | undefined {
      return realms.get(realm)?.failure;
    },
    /** Whether Keycloak said lately (here or on another path) that it does not have `realm`. */
    isGone(realm: string): boolean {
      return gone.isGone(realm);
    },
    /** The `kid`s of the realm's signature keys, as last fetched. */
    kidsOf(realm: string): string[] {
      return [...(realms.get(realm)?.kids ?? [])];
    },
    /** Stops the background fetches. */
    close(): void {
      closed = true;
      for (const state of realms.values()) clearTimeout(state.timer);
      realms.clear();
    },
  };
}

export type JwksRegistry = ReturnType<typeof createJwksRegistry>;
