import type { IncomingMessage } from 'node:http';
import type { Cache } from '../cache/cache.ts';
import { TtlLru } from '../cache/ttl-lru.ts';
import { createLookupBudget } from '../edge/lookup-budget.ts';
import { AppError, type ErrorCode } from '../envelope/errors.ts';
import type { Principal } from '../tenancy/principal.ts';
import { systemClock, type Clock } from '../time/clock.ts';
import type { Answer } from './answer.ts';
import { AuthFailure } from './auth-failure.ts';
import { refusing } from './refused-caller.ts';
import type { TokenDetailsStore, TokenReach } from './token-details.ts';

/** Methods a read-only token may use: those that change nothing (RFC 9110 9.2.1). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The refusal of a reach: outside its workspaces, a write when read-only, or past its expiry. */
export type ReachRefusal = Extract<ErrorCode, 'outsideTokenReach' | 'readOnlyToken'> | 'expired';

/** Whether the lifetime given at issuance is over (never, when none was given). */
export function reachExpired(reach: TokenReach, nowMs: number): boolean {
  return reach.expiresAt !== undefined && nowMs >= reach.expiresAt;
}

/** What a call reaches, as its route says (edge/route.ts). */
export interface ReachedByCall {
  /** The workspace its path names. */
  workspace?: string | undefined;
  /**
   * What it serves is no workspace's: the caller's account and its sessions, the whole
   * organization's audit log (`RouteDeclaration.beyondWorkspaces`; Keycloak's account and
   * admin API through `/auth`).
   */
  beyondWorkspaces?: boolean | undefined;
}

/**
 * Whether a token of this reach may make this call: any call after its expiry, a workspace
 * outside its list or what is no workspace's for a token narrowed to workspaces, an unsafe
 * method on a read-only token is refused, in that order. Routes that name no workspace and are
 * not beyond them (the organization's lists) are within reach; they show only what it reaches
 * (authorize.ts `listsWorkspace`).
 */
export function reachRefusal(
  reach: TokenReach,
  call: ReachedByCall,
  method: string,
  nowMs: number,
): ReachRefusal | undefined {
  if (reachExpired(reach, nowMs)) return 'expired';
  if (
    reach.workspaces &&
    (call.beyondWorkspaces === true ||
      (call.workspace !== undefined && !reach.workspaces.includes(call.workspace)))
  ) {
    return 'outsideTokenReach';
  }
  if (reach.readOnly && !SAFE_METHODS.has(method.toUpperCase())) return 'readOnlyToken';
  return undefined;
}

/**
 * Whether a token of this reach may make a call that ends its own session (`realmgate logout`):
 * whatever its workspaces and read-only, until its lifetime is over. Ending itself is no write
 * to the platform, and a credential that could not end itself would stay alive until it
 * expires; past its lifetime its session is ended anyway (on its next refresh grant).
 */
export function ownSessionEndRefusal(reach: TokenReach, nowMs: number): ReachRefusal | undefined {
  return reachExpired(reach, nowMs) ? 'expired' : undefined;
}

/**
 * Whether a token of this reach may make this call to Keycloak (through `/auth`: its Account
 * API, its admin API): what Keycloak serves there is the whole account (its profile, its
 * sessions, its consents and so every offline token), beyond any workspace, as the account's
 * routes of `/api` are.
 */
export function keycloakReachRefusal(
  reach: TokenReach,
  method: string,
  nowMs: number,
): ReachRefusal | undefined {
  return reachRefusal(reach, { beyondWorkspaces: true }, method, nowMs);
}

/**
 * What the reach step can answer a call of `method` with (the OpenAPI document lists them): its
 * expiry (401), workspaces it does not reach where the path names one or the route is beyond
 * them, an unsafe method on a read-only token; a reach nobody could look up while the database
 * is down (503).
 */
export function reachRefusalsOf(method: string, reachesWorkspaces: boolean): ErrorCode[] {
  return [
    'authenticationFailed',
    ...(reachesWorkspaces ? (['outsideTokenReach'] as const) : []),
    ...(SAFE_METHODS.has(method.toUpperCase()) ? [] : (['readOnlyToken'] as const)),
    'databaseUnavailable',
  ];
}

const BEYOND_WORKSPACES =
  "This token reaches its workspaces only, not its user's account nor the whole organization.";

/**
 * The refusal of `principal`'s call. An expiry is a refusal of the token: its cause, the
 * AuthFailure of the token's scheme, gives the admission the challenge to answer it with
 * (authenticate.ts), as for any other refusal of the token.
 */
function refusalError(refusal: ReachRefusal, principal: Principal, call: ReachedByCall): AppError {
  if (refusal === 'outsideTokenReach' && call.beyondWorkspaces === true) {
    return new AppError(refusal, { message: BEYOND_WORKSPACES });
  }
  if (refusal !== 'expired') return new AppError(refusal);
  const message = 'The refresh token of this session has expired.';
  const scheme = principal.boundKey === undefined ? 'bearer' : 'dpop';
  return new AppError('authenticationFailed', {
    message,
    // Its reason, for the audit log too.
    cause: new AuthFailure(scheme, 'expired', message),
  });
}

/** The reach step of the admission (admission.ts), after the credentials are known good. */
export interface ReachStep {
  /**
   * The principal, its reach attached when its session has one, if the call is within it: at
   * once when this process remembers the session's reach, else after looking it up. Throws (or
   * rejects with) the refusal. `call.endsSession`: the session the call ends, when it ends one
   * (`RouteDeclaration.endsSession`); the caller's own is held to `ownSessionEndRefusal` only.
   */
  admit(
    principal: Principal,
    req: IncomingMessage,
    call: ReachedByCall & { endsSession?: string | undefined },
  ): Answer<Principal>;
  /**
   * The reach of a session a token nobody verified names (on `/auth`: anyone can make one up),
   * for `req`: remembered as for the admission; undefined: it has none. A session this process
   * does not know is looked up on `req`'s client's lookups (`UNVERIFIED_LOOKUPS`), else
   * `LOOKUPS_SPENT`: its reach is unknown, as with the database down. One the store has no
   * record of is remembered by this process only, apart from the reaches: a flood of made-up
   * ones evicts no real reach here and writes nothing to the shared cache.
   */
  reachOf(sessionId: string, req: IncomingMessage): Promise<TokenReach | undefined | LookupsSpent>;
  /**
   * The reach this process remembers of a session, without any lookup: `{ reach }` (undefined:
   * it has none), or undefined when this process does not know the session.
   */
  rememberedReachOf(sessionId: string): { reach: TokenReach | undefined } | undefined;
  /**
   * The reach of a session Keycloak just accepted a token of (a refresh grant's 200: its id is
   * Keycloak's, not made up): remembered, else looked up, on no client's lookups; undefined: it
   * has none. Rejects as `admit` does with the database down and no replica's read shared.
   */
  confirmedReachOf(sessionId: string): Promise<TokenReach | undefined>;
  /** Notes a use of the session by `req` (a refresh grant): at most once a minute. */
  noteUse(session: UsedSession, req: IncomingMessage): void;
}

/** A call of a session's token, as the reach step decides it. */
interface SessionCall extends ReachedByCall {
  principal: Principal;
  sessionId: string;
  endsSession?: string | undefined;
  req: IncomingMessage;
}

interface UsedSession {
  sessionId: string;
  realm: string;
  userId: string;
}

/** The answer of `ReachStep.reachOf` when the client has no lookup left: retry in a second. */
export const LOOKUPS_SPENT = 'lookupsSpent' as const;
export type LookupsSpent = typeof LOOKUPS_SPENT;

/**
 * Database lookups per second (and burst) of sessions named by tokens on `/auth`, per worker
 * process, and one client's part (edge/lookup-budget.ts). Unlike an organization's id, which all
 * its jobs share, each job has a session of its own, looked up once an hour per process.
 *
 * Per worker process, not per replica: each worker builds its own reach step, so a replica of
 * `WORKERS` workers reads up to `WORKERS` times this (8,000 a second with 16). Not divided by
 * the worker count, on purpose: only a token verified first spends one (an access token its
 * realm signed, token-reach-guard.ts; a refresh grant's session is looked up once Keycloak
 * accepted it, on no client's lookups, job-credentials.ts), so what these reads cost is bounded
 * by the sessions Keycloak opened, each read once an hour per process, not by what anyone can
 * make up. The bound smooths a burst of real sessions; divided (31 a second and 6 a client with
 * 16 workers, the connections spread over them) it would refuse a fleet's burst sixteen times
 * sooner and keep no forger out.
 */
export const UNVERIFIED_LOOKUPS = { perSecond: 500, clientPerSecond: 100, keptForOthers: 100 };

/** No reach: what the process remembers of a session that has none. */
const NONE = 'none' as const;
/** A session's reach never changes after issuance: remembered this long, then looked up again. */
const REMEMBERED_MS = 60 * 60 * 1000;
/** The last use of a session is written at most this often. */
export const USE_INTERVAL_MS = 60 * 1000;

/**
 * Looks sessions' reaches up in the store (once per session and process: a reach is written
 * before its token is handed out and never changes, so every replica reads the same one; a
 * revocation or the end of the session is what ends it, through the revocation list), and
 * writes each Bearer session's last use (when, client address, user agent; never the token)
 * at most once a minute.
 */
export function createReachStep(deps: {
  store: TokenDetailsStore;
  /**
   * Shared with the other replicas and workers: the reach each of them read, so that a session
   * one of them saw is served by all while the database is down.
   */
  cache: Cache;
  clientAddressOf: (req: IncomingMessage) => string;
  maxEntries: number;
  clock?: Clock;
  onUseFailed: (err: unknown) => void;
}): ReachStep {
  const { clock = systemClock } = deps;
  const now = () => clock.now();
  const reaches = new TtlLru<TokenReach | typeof NONE>(deps.maxEntries, clock);
  const noted = new TtlLru<true>(deps.maxEntries, clock);
  /** Sessions of unverified tokens the store has no record of: perhaps made up (`reachOf`). */
  const unrecorded = new TtlLru<true>(deps.maxEntries, clock);
  const lookups = createLookupBudget({ ...UNVERIFIED_LOOKUPS, maxClients: deps.maxEntries }, clock);
  /**
   * The lookups in progress, by session: a client's requests at once with one token (a console's
   * page loading, a job's calls) wait for the one lookup, and spend no more of its share.
   */
  const reading = new Map<string, Promise<TokenReach | typeof NONE>>();

  function noteUse(session: UsedSession, req: IncomingMessage): void {
    if (noted.get(session.sessionId)) return;
    const at = now();
    noted.set(session.sessionId, true, at + USE_INTERVAL_MS);
    const userAgent = req.headers['user-agent'];
    deps.store
      .noteUse(session, { at, address: deps.clientAddressOf(req), userAgent }, USE_INTERVAL_MS)
      .catch(deps.onUseFailed);
  }

  /** The session's reach: at once when remembered, else looked up in the store. */
  function reachOf(sessionId: string): Answer<TokenReach | typeof NONE> {
    const known = reaches.get(sessionId);
    if (known !== undefined) return known;
    const read = async () => (await deps.store.reachOf(sessionId)) ?? NONE;
    return lookUp(sessionId, read).then((reach) => remember(sessionId, reach));
  }

  function remember(sessionId: string, reach: TokenReach | typeof NONE) {
    reaches.set(sessionId, reach, now() + REMEMBERED_MS);
    return reach;
  }

  /** `ReachStep.reachOf`: the reach of a session an unverified token names. */
  async function unverifiedReachOf(
    sessionId: string,
    req: IncomingMessage,
  ): Promise<TokenReach | typeof NONE | LookupsSpent> {
    const known = rememberedOf(sessionId) ?? reading.get(sessionId);
    if (known !== undefined) return known;
    if (!lookups.take(deps.clientAddressOf(req))) return LOOKUPS_SPENT;
    return recordedReachOf(sessionId);
  }

  /** What this process remembers of a session, without a lookup. */
  function rememberedOf(sessionId: string): TokenReach | typeof NONE | undefined {
    return reaches.get(sessionId) ?? (unrecorded.get(sessionId) ? NONE : undefined);
  }

  /**
   * The session's record looked up (requests at once naming it wait for its one lookup); one the
   * store has no record of is remembered by this process alone (`unrecorded`).
   */
  async function recordedReachOf(sessionId: string): Promise<TokenReach | typeof NONE> {
    const read = async () => {
      const record = await deps.store.recordOf(sessionId);
      return record && (record.reach ?? NONE);
    };
    const found = lookUp(sessionId, read).then((reach) => {
      if (reach !== undefined) return remember(sessionId, reach);
      unrecorded.set(sessionId, true, now() + REMEMBERED_MS);
      return NONE;
    });
    reading.set(sessionId, found);
    try {
      return await found;
    } finally {
      reading.delete(sessionId);
    }
  }

  /**
   * The store's answer (`read`), shared for the others; undefined from `read`: the store has no
   * record of the session, which is not shared (its id may be made up). With the database down,
   * what a replica or worker read before answers (a record is written before its token is
   * handed out, so a read "none" is final); a session nobody read stays refused (the store's
   * error).
   */
  async function lookUp<Read extends TokenReach | typeof NONE | undefined>(
    sessionId: string,
    read: () => Promise<Read>,
  ): Promise<Read | TokenReach | typeof NONE> {
    const key = `token-reach:${sessionId}`;
    let reach: Read;
    try {
      reach = await read();
    } catch (err) {
      const shared = await deps.cache.get(key).catch(() => undefined);
      if (shared === undefined) throw err;
      return shared === NONE ? NONE : (JSON.parse(shared) as TokenReach);
    }
    if (reach === undefined) return reach;
    const value = reach === NONE ? NONE : JSON.stringify(reach);
    await deps.cache.set(key, value, REMEMBERED_MS).catch(() => undefined);
    return reach;
  }

  const usedSession = (principal: Principal, sessionId: string): UsedSession => ({
    sessionId,
    realm: principal.realm,
    userId: principal.userId,
  });

  function decide(
    principal: Principal,
    reach: TokenReach | typeof NONE,
    call: SessionCall,
    method: string,
  ): Principal {
    if (reach === NONE) return principal;
    const refusal =
      call.endsSession === call.sessionId
        ? ownSessionEndRefusal(reach, now())
        : reachRefusal(reach, call, method, now());
    // Refused, the caller is still named with its reach (its job credential) in the audit log.
    if (refusal) throw refusing(refusalError(refusal, principal, call), { ...principal, reach });
    return { ...principal, reach };
  }

  /** Admits `principal` for this call under `reach` (throws the refusal), noting the use. */
  function admitWithin(reach: TokenReach | typeof NONE, call: SessionCall): Principal {
    const admitted = decide(call.principal, reach, call, call.req.method ?? '');
    noteUse(usedSession(call.principal, call.sessionId), call.req);
    return admitted;
  }

  return {
    admit(principal, req, reached) {
      const sessionId = principal.method === 'bearer' ? principal.sessionId : undefined;
      if (sessionId === undefined) return principal;
      const call: SessionCall = { ...reached, principal, sessionId, req };
      const reach = reachOf(sessionId);
      return reach instanceof Promise
        ? reach.then((found) => admitWithin(found, call))
        : admitWithin(reach, call);
    },
    async reachOf(sessionId, req) {
      const reach = await unverifiedReachOf(sessionId, req);
      return reach === NONE ? undefined : reach;
    },
    rememberedReachOf(sessionId) {
      const known = rememberedOf(sessionId);
      if (known === undefined) return undefined;
      return { reach: known === NONE ? undefined : known };
    },
    async confirmedReachOf(sessionId) {
      const reach =
        rememberedOf(sessionId) ?? (await (reading.get(sessionId) ?? recordedReachOf(sessionId)));
      return reach === NONE ? undefined : reach;
    },
    noteUse,
  };
}
