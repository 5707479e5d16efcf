import type KcAdminClient from '@keycloak/keycloak-admin-client';
import type { Principal } from '../tenancy/principal.ts';
import type { RevocationList } from '../auth/revocation.ts';
import { listsSession } from '../auth/authorize.ts';
import type { TokenDetails, TokenDetailsStore } from '../auth/token-details.ts';
import { AppError } from '../envelope/errors.ts';
import { isKeycloakNotFound } from '../keycloak/admin-client.ts';
import { apiClientIdOf } from '../tenancy/identifiers.ts';
import { longestAccessTokenSeconds } from './realm-admin/users.ts';
import {
  adminCall,
  clientNamed,
  endedSessionIds,
  otherClientsOfflineSessionIds,
  userSessions,
} from './realm-admin/user-sessions.ts';
import type { ServiceAdmin } from '../keycloak/service-admin.ts';
import type { TokenBindingStore } from '../auth-proxy/token-bindings.ts';
import type { RefreshTokenRecord } from './refresh-tokens.schemas.ts';

export type { RefreshTokenRecord };

export interface RefreshTokensService {
  list(principal: Principal): Promise<RefreshTokenRecord[]>;
  /** Revokes every refresh token of the caller (spec 4.6). */
  revokeAll(principal: Principal): Promise<void>;
  /**
   * Revokes one, by its session id or its name; another user's (or an unknown) one is 404, so
   * ids cannot be probed.
   */
  revokeOne(principal: Principal, idOrName: string): Promise<void>;
}

/** Lifetimes that decide when an offline session ends, in seconds (0 = no limit). */
interface SessionLimits {
  idleSeconds: number;
  maxSeconds: number;
  /** Longest life of an access token of the API client, for how long a revocation must last. */
  accessTokenSeconds: number;
}

interface OfflineSession {
  id: string;
  startMs: number;
  lastAccessMs: number;
}

/**
 * The caller's refresh tokens through the Keycloak admin API, as the gateway's service account.
 * Revocation also tells every replica to refuse the sessions' access tokens at once.
 */
export function createRefreshTokensService(deps: {
  admin: ServiceAdmin;
  revocations: RevocationList;
  /** Names, reaches and last uses; rows of sessions Keycloak has ended are dropped here too. */
  details: TokenDetailsStore;
  /** The keys bound sessions' tokens are bound to (DPoP), in the same rows as `details`. */
  bindings: TokenBindingStore;
  /**
   * Refuses the access tokens of the user's sessions Keycloak has ended, on every replica, for as
   * long as one of the realm's may live, or a day when Keycloak cannot say how long
   * (auth-proxy/access-revocations.ts `endSessions`).
   */
  refuseEnded: (realm: string, sessionIds: readonly string[], userId: string) => Promise<void>;
  basicCacheSeconds: number;
  leewaySeconds: number;
}): RefreshTokensService {
  async function offlineSessions(
    principal: Principal,
  ): Promise<{ sessions: OfflineSession[]; limits: SessionLimits; clientUuid: string }> {
    const realm = principal.realm;
    return deps.admin.run(realm, async (admin) => {
      const client = await clientNamed(admin, realm, apiClientIdOf(realm), true);
      const clientUuid = client.id;
      // One after the other, so that a failure always names the same step.
      const raw = await adminCall('offlineSessionsUnreadable', () =>
        admin.users.listOfflineSessions({ realm, id: principal.userId, clientId: clientUuid }),
      );
      const limits = await limitsOf(admin, realm, client.attributes ?? {});
      const sessions = raw.map((s) => ({
        id: String(s.id),
        startMs: Number(s.start),
        lastAccessMs: Number(s.lastAccess),
      }));
      return { sessions, limits, clientUuid };
    });
  }

  /**
   * The user's online sessions holding the API client: those of a password grant without
   * `offline_access`, whose refresh token is a refresh token of the user too (spec 4.6), and
   * the gateway's own Basic logins (dropped by any revocation anyway).
   */
  async function onlineSessionIds(principal: Principal, clientUuid: string): Promise<string[]> {
    return (await userSessions(deps.admin, principal.realm, principal.userId))
      .filter((s) => s.id !== undefined && Object.keys(s.clients ?? {}).includes(clientUuid))
      .map((s) => String(s.id));
  }

  async function revoke(
    principal: Principal,
    sessionIds: string[],
    limits: SessionLimits,
  ): Promise<void> {
    await deps.revocations.revoke({
      realm: principal.realm,
      userId: principal.userId,
      sessionIds,
      ttlSeconds: limits.accessTokenSeconds + deps.leewaySeconds,
      userTtlSeconds: Math.max(deps.basicCacheSeconds, 1),
    });
  }

  return {
    async list(principal) {
      // Before Keycloak's lists: `detailsOf` drops only rows older than they are.
      const rows = await deps.details.ofUser(principal.realm, principal.userId);
      const { sessions: all, limits } = await offlineSessions(principal);
      // Given them all: `detailsOf` drops the row of a session it is not given that Keycloak has
      // in no other list, and a job credential without its row would reach all its user may.
      const details = await detailsOf(principal, rows, all);
      const sessions = all.filter((session) => listsSession(principal, session.id));
      const bindings = await deps.bindings.ofUser(principal.realm, principal.userId);
      return sessions.map((session) => ({
        ...toRecord(session, limits, details.get(session.id)),
        dpop_jkt: bindings.get(session.id) ?? null,
      }));
    },
    async revokeAll(principal) {
      const { sessions, limits, clientUuid } = await offlineSessions(principal);
      const online = await onlineSessionIds(principal, clientUuid);
      // The sessions read are ended by id, and exactly those refused: one Keycloak opens after
      // the read lives on whole (issued during the call). Revoking the client's consent instead
      // would also end those, unseen, leaving their access tokens accepted here.
      const offlineIds = sessions.map((s) => s.id);
      const offlineFailure = await endInKeycloak(principal.realm, offlineIds, true);
      const failure = (await endInKeycloak(principal.realm, online, false)) ?? offlineFailure;
      // Refused even when an end failed: the answer is then 500, and the retry ends the rest.
      await revoke(principal, [...new Set([...offlineIds, ...online])], limits);
      if (failure) throw failure;
      // The rows of the sessions ended, and no other: one opened meanwhile lives on, and so
      // must its reach (`detailsOf`).
      await deps.details.forget(principal.realm, principal.userId, [...offlineIds, ...online]);
    },
    async revokeOne(principal, idOrName) {
      // Before Keycloak's lists, as for `list`.
      const rows = await deps.details.ofUser(principal.realm, principal.userId);
      const { sessions, limits } = await offlineSessions(principal);
      // The rows of the sessions listed name the caller's own; dropping the rows of ended ones
      // reads the user's other sessions too (other clients' among them), and one of those that
      // cannot be read leaves them for the next list rather than keep this token alive.
      const details = await detailsOf(principal, rows, sessions).catch(() =>
        listedRows(rows, sessions),
      );
      // By id first, then by name: a name never stands for a session's id, and the caller's
      // own id names its own session only (a token may end itself whatever its reach, reach.ts).
      const isId =
        idOrName === principal.sessionId ||
        sessions.some((s) => s.id === idOrName) ||
        rows.some((row) => row.sessionId === idOrName);
      const id = isId
        ? idOrName
        : [...details.values(), ...rows].find((row) => row.name === idOrName)?.sessionId;
      if (id === undefined) throw new AppError('refreshTokenNotFound');
      const ends = sessions.some((s) => s.id === id)
        ? { offline: true, online: false, accessTokenSeconds: limits.accessTokenSeconds }
        : await unlistedSessionEnds(principal, id, limits);
      if (ends === undefined) throw new AppError('refreshTokenNotFound');
      // As for them all: a session Keycloak ended since the list (404) is ended, and its access
      // tokens are refused whatever Keycloak answered (one that timed out may have ended it; a
      // retry would find it no longer listed, 404, and leave its access tokens accepted).
      const offlineFailure = ends.offline
        ? await endInKeycloak(principal.realm, [id], true)
        : undefined;
      const onlineFailure = ends.online
        ? await endInKeycloak(principal.realm, [id], false)
        : undefined;
      await revoke(principal, [id], { ...limits, accessTokenSeconds: ends.accessTokenSeconds });
      const failure = offlineFailure ?? onlineFailure;
      if (failure) throw failure;
      await deps.details.forget(principal.realm, principal.userId, [id]);
    },
  };

  /**
   * How to end session `id`, one of the caller's that the list does not show (a job credential
   * issued without `offline_access`, or on another client of the realm; the caller's own): its
   * online session and its offline session of another client, each where Keycloak still has one
   * (ended both ways when it is in both lists), and for how long to refuse its access tokens:
   * another client's may live longer than the API client's, so the realm's longest. Undefined:
   * Keycloak has it in neither list.
   */
  async function unlistedSessionEnds(
    principal: Principal,
    id: string,
    limits: SessionLimits,
  ): Promise<{ offline: boolean; online: boolean; accessTokenSeconds: number } | undefined> {
    const { realm, userId } = principal;
    const online = (await userSessions(deps.admin, realm, userId)).some((s) => s.id === id);
    const offline = (await otherClientsOfflineSessionIds(deps.admin, realm, userId)).includes(id);
    if (!online && !offline) return undefined;
    const longest = await deps.admin.run(realm, (admin) =>
      adminCall('realmUnreadable', () => longestAccessTokenSeconds(admin, realm)),
    );
    return { offline, online, accessTokenSeconds: Math.max(limits.accessTokenSeconds, longest) };
  }

  /**
   * Ends the sessions (offline, or online) in Keycloak, a few at a time; one Keycloak says is
   * gone (its own 404, `isKeycloakNotFound`) is ended.
   * Every one is tried; the first failure is given back, not thrown, so that the caller refuses
   * their access tokens whatever happened.
   */
  async function endInKeycloak(
    realm: string,
    ids: string[],
    isOffline: boolean,
  ): Promise<Error | undefined> {
    let failure: Error | undefined;
    for (let first = 0; first < ids.length; first += END_AT_ONCE) {
      const ends = ids.slice(first, first + END_AT_ONCE).map((session) =>
        deps.admin
          .run(realm, (admin) =>
            adminCall('revokeFailed', () =>
              admin.realms.deleteSession({ realm, session, isOffline }).catch((err: unknown) => {
                // Ended already; not a proxy's 404 while Keycloak is away (nothing ended then).
                if (!isKeycloakNotFound(err)) throw err;
              }),
            ),
          )
          .catch((err: unknown) => {
            failure ??= err instanceof Error ? err : new Error(String(err));
          }),
      );
      await Promise.all(ends);
    }
    return failure;
  }

  /**
   * The rows of the API client's offline `sessions` by session id, once the rows of sessions
   * Keycloak has ended are dropped: their names can be given again. (Rows left to expire with
   * the lifetime given at issuance would not do: a job credential need not have one, and its
   * name would stay taken after Keycloak ended it.)
   *
   * A row is what keeps a live job credential narrowed: a replica that has not read it yet
   * (reach.ts) would admit a session without one with its user's whole reach. So a row is
   * dropped only when Keycloak has its session in none of its lists (a job credential may be
   * an online session, or another client's), and only when it was read before Keycloak was
   * (`rows`): one written meanwhile may be of a session opened after Keycloak answered.
   */
  async function detailsOf(
    principal: Principal,
    rows: TokenDetails[],
    sessions: OfflineSession[],
  ): Promise<Map<string, TokenDetails>> {
    const { realm, userId } = principal;
    const listed = sessions.map((s) => s.id);
    const ended = await endedSessionIds(
      deps.admin,
      realm,
      userId,
      rows.map((row) => row.sessionId),
      listed,
    );
    if (ended.length > 0) {
      // Without their records, a replica that never read them would admit the sessions'
      // unexpired access tokens with their user's whole reach: refused first.
      await deps.refuseEnded(realm, ended, userId);
      await deps.details.forget(realm, userId, ended);
    }
    return listedRows(rows, sessions);
  }
}

/** The rows of the offline `sessions` listed, by session id. */
function listedRows(rows: TokenDetails[], sessions: OfflineSession[]): Map<string, TokenDetails> {
  const listed = new Set(sessions.map((s) => s.id));
  return new Map(
    rows.filter((row) => listed.has(row.sessionId)).map((row) => [row.sessionId, row]),
  );
}

/** How many sessions a revocation of them all ends in Keycloak at once. */
const END_AT_ONCE = 8;

/** The realm's offline limits, overridden by the API client's own when set (> 0). */
async function limitsOf(
  admin: KcAdminClient,
  realm: string,
  clientAttributes: Record<string, unknown>,
): Promise<SessionLimits> {
  const settings = await adminCall('realmUnreadable', () => admin.realms.findOne({ realm }));
  // Without view-realm, Keycloak answers a reduced representation with no session settings:
  // computing expiries from it would silently say "never expires".
  if (settings?.offlineSessionIdleTimeout === undefined) {
    throw new AppError('realmUnreadable', { message: 'The realm settings are not readable.' });
  }
  const attribute = (name: string) => Number(clientAttributes[name] ?? 0) || 0;
  const clientIdle = attribute('client.offline.session.idle.timeout');
  const clientMax = attribute('client.offline.session.max.lifespan');
  const maxEnabled = settings.offlineSessionMaxLifespanEnabled === true;
  return {
    idleSeconds: clientIdle > 0 ? clientIdle : (settings.offlineSessionIdleTimeout ?? 0),
    maxSeconds: maxEnabled
      ? clientMax > 0
        ? clientMax
        : (settings.offlineSessionMaxLifespan ?? 0)
      : 0,
    accessTokenSeconds: attribute('access.token.lifespan') || (settings.accessTokenLifespan ?? 300),
  };
}

/**
 * Expiry is the earliest of start + max lifespan (when enabled), last access + idle timeout and
 * the lifetime given at issuance.
 */
function toRecord(
  session: OfflineSession,
  limits: SessionLimits,
  details: TokenDetails | undefined,
): Omit<RefreshTokenRecord, 'dpop_jkt'> {
  const candidates = [
    limits.idleSeconds > 0 ? session.lastAccessMs + limits.idleSeconds * 1000 : Infinity,
    limits.maxSeconds > 0 ? session.startMs + limits.maxSeconds * 1000 : Infinity,
    details?.expiresAt ?? Infinity,
  ];
  const lastUse = details?.lastUse;
  const expiry = Math.min(...candidates);
  return {
    id: session.id,
    start_timestamp: new Date(session.startMs).toISOString(),
    lastaccess_timestamp: new Date(session.lastAccessMs).toISOString(),
    expire_timestamp: Number.isFinite(expiry)
      ? new Date(expiry).toISOString()
      : '9999-12-31T23:59:59.999Z',
    name: details?.name ?? null,
    workspaces: details?.workspaces ? [...details.workspaces] : null,
    read_only: details?.readOnly ?? false,
    last_use: lastUse
      ? {
          timestamp: new Date(lastUse.at).toISOString(),
          client_address: lastUse.address,
          user_agent: lastUse.userAgent ?? null,
        }
      : null,
  };
}
