import { createLocalJWKSet, errors as joseErrors, type JWTVerifyGetKey } from 'jose';
import type { Logger } from 'pino';
import type { KeycloakCalls } from '../../keycloak/keycloak-calls.ts';
import { failureOf, unexpectedAnswer } from '../../keycloak/keycloak-failures.ts';
import { createLocalKeySetMemory, type KeySetMemory } from './key-set-memory.ts';
import { refreshDelayMs, UNKNOWN_KID_GAP_MS } from './key-set-schedule.ts';

/** A realm's key set as last fetched, and the fetches around it. */
interface RealmKeys {
  /** jose's selection over the set (by `kid`, `use: sig` only); undefined before the first fetch. */
  select?: JWTVerifyGetKey;
  /** The `kid`s of the set's signature keys: what a remembered token's key is checked against. */
  kids: ReadonlySet<string>;
  /** When the last fetch started (ms), for the gap between fetches an unknown kid may cause. */
  startedAt: number;
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
 *   when Keycloak cannot be reached or did not answer in time; a bad answer is never replaced.
 */
export function createJwksRegistry(options: {
  calls: Pick<KeycloakCalls, 'exchange'>;
  refreshSeconds: number;
  memory?: KeySetMemory;
  logger?: Logger;
  now?: () => number;
  random?: () => number;
}) {
  const { calls, memory = createLocalKeySetMemory(), logger } = options;
  const now = options.now ?? Date.now;
  const random = options.random ?? Math.random;
  const realms = new Map<string, RealmKeys>();
  let closed = false;

  function stateOf(realm: string): RealmKeys {
    let state = realms.get(realm);
    if (!state) {
      state = { kids: new Set(), startedAt: -Infinity, used: true, idleSince: now() };
      realms.set(realm, state);
      schedule(realm, state);
    }
    return state;
  }

  /** The next background fetch; a realm idle for IDLE_MS is dropped instead. */
  function schedule(realm: string, state: RealmKeys): void {
    if (closed) return;
    state.timer = setTimeout(
      () => {
        if (state.used) state.idleSince = now();
        state.used = false;
        if (now() - state.idleSince >= IDLE_MS) {
          realms.delete(realm);
          return;
        }
        void fetchAfter(realm, state, now()).finally(() => schedule(realm, state));
      },
      refreshDelayMs(options.refreshSeconds, random),
    );
    state.timer.unref();
  }

  /** A fetch that starts at `arrival` or later: the running one if it did, else the next. */
  function fetchAfter(realm: string, state: RealmKeys, arrival: number): Promise<void> {
    if (state.running && state.startedAt >= arrival) return state.running;
    state.queued ??= (async () => {
      await state.running;
      const gap = state.startedAt + UNKNOWN_KID_GAP_MS - now();
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
      const set = await calls.exchange('jwks', path, undefined, readKeySet);
      ({ select: state.select, kids: state.kids } = set);
      memory.remember(realm, set.body);
      state.failure = undefined;
    } catch (err) {
      // The client layer rejects with its AppError (503/504/502).
      state.failure = err instanceof Error ? err : new Error(String(err));
      logger?.warn({ err, realm }, 'key set fetch failed; the last good set stays');
      if (state.select || failureOf(err) === 'bad_answer') return;
      const kept = await memory.recall(realm);
      if (kept !== undefined) ({ select: state.select, kids: state.kids } = readKeySet(200, kept));
    }
  }

  /** Which key verifies a token: the set's, once a fetch that started after it arrived is over. */
  async function selectKey(realm: string, ...args: Parameters<JWTVerifyGetKey>) {
    const arrival = now();
    const state = stateOf(realm);
    state.used = true;
    const kid = args[0].kid;
    if (typeof kid !== 'string') throw new joseErrors.JWKSNoMatchingKey();
    if (!state.kids.has(kid)) {
      await fetchAfter(realm, state, arrival);
      if (!state.kids.has(kid) && state.failure !== undefined) throw state.failure;
    }
    if (!state.select) throw state.failure ?? new joseErrors.JWKSNoMatchingKey();
    return state.select(...args);
  }

  return {
    /** The key selection jose's `jwtVerify` takes for a token of `realm`. */
    keySetFor(realm: string): JWTVerifyGetKey {
      return (...args) => selectKey(realm, ...args);
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

/**
 * Keycloak's answer as a key set: jose's selection over it and its signature keys' `kid`s, or
 * the failure it means.
 */
function readKeySet(status: number, body: string) {
  if (status !== 200) throw unexpectedAnswer('key set', status);
  let set: { keys?: unknown } | null;
  try {
    set = JSON.parse(body) as { keys?: unknown } | null;
  } catch {
    throw unexpectedAnswer('key set', status, 'not JSON');
  }
  const keys = set?.keys;
  if (!Array.isArray(keys)) throw unexpectedAnswer('key set', status, 'no "keys"');
  let select: JWTVerifyGetKey;
  try {
    select = createLocalJWKSet(set as Parameters<typeof createLocalJWKSet>[0]);
  } catch {
    throw unexpectedAnswer('key set', status, 'not a key set');
  }
  const kids = new Set<string>();
  for (const key of keys as Array<{ kid?: unknown; use?: unknown }>) {
    if (typeof key.kid === 'string' && (key.use === undefined || key.use === 'sig')) {
      kids.add(key.kid);
    }
  }
  return { body, select, kids };
}

export type JwksRegistry = ReturnType<typeof createJwksRegistry>;
