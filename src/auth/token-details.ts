import type { Knex } from 'knex';
import { toIsoTimestamp, toJsonb, toStringArray } from '../db/column-values.ts';
import type { TokenReach } from '../tenancy/principal.ts';

export type { TokenReach };

/** Where a session was last used from. */
export interface TokenUse {
  at: number;
  address: string;
  userAgent: string | undefined;
}

/** One row: a session's name, reach and last use. */
export interface TokenDetails extends TokenReach {
  sessionId: string;
  name: string | undefined;
  lastUse: TokenUse | undefined;
}

/** What the owner asked for at issuance, recorded against the new session. */
export interface IssuedDetails extends TokenReach {
  sessionId: string;
  realm: string;
  userId: string;
  name: string | undefined;
}

export interface TokenDetailsStore {
  /** Records an issued token's details; `nameTaken` when the user has a token of that name. */
  record(details: IssuedDetails): Promise<'recorded' | 'nameTaken'>;
  /** The session's reach; undefined when it has none (the token may do what its user may). */
  reachOf(sessionId: string): Promise<TokenReach | undefined>;
  /**
   * The session's reach as `reachOf` reads it, in a record; undefined when the store has no row
   * of the session at all (issued without the fields and never used through the gateway yet, or
   * a session id nobody issued).
   */
  recordOf(sessionId: string): Promise<{ reach: TokenReach | undefined } | undefined>;
  /**
   * Writes the session's last use, unless one was written less than `minIntervalMs` ago (by
   * any replica).
   */
  noteUse(
    session: { sessionId: string; realm: string; userId: string },
    use: TokenUse,
    minIntervalMs: number,
  ): Promise<void>;
  /** Every row of the user's sessions. */
  ofUser(realm: string, userId: string): Promise<TokenDetails[]>;
  /** Drops the rows of these sessions of the user (revoked, or gone from Keycloak). */
  forget(realm: string, userId: string, sessionIds: readonly string[]): Promise<void>;
}

/** Whether a reach narrows anything (a name alone does not). */
export function narrows(reach: TokenReach): boolean {
  return reach.workspaces !== undefined || reach.readOnly || reach.expiresAt !== undefined;
}

const TABLE = 'refresh_token_details';

interface Row {
  session_id: string;
  realm: string;
  user_id: string;
  name: string | null;
  workspaces: unknown;
  read_only: boolean;
  expires_at: unknown;
  last_used_at: unknown;
  last_used_address: string | null;
  last_used_agent: string | null;
}

const timeOf = (value: unknown) =>
  value === null || value === undefined ? undefined : Date.parse(toIsoTimestamp(value));

function reachOfRow(row: Row): TokenReach {
  return {
    workspaces:
      row.workspaces === null || row.workspaces === undefined
        ? undefined
        : toStringArray(row.workspaces),
    readOnly: row.read_only,
    expiresAt: timeOf(row.expires_at),
    name: row.name ?? undefined,
  };
}

function detailsOfRow(row: Row): TokenDetails {
  const lastUsedAt = timeOf(row.last_used_at);
  return {
    ...reachOfRow(row),
    sessionId: row.session_id,
    name: row.name ?? undefined,
    lastUse:
      lastUsedAt === undefined
        ? undefined
        : {
            at: lastUsedAt,
            address: row.last_used_address ?? '',
            userAgent: row.last_used_agent ?? undefined,
          },
  };
}

/** PostgreSQL's unique_violation. */
const UNIQUE_VIOLATION = '23505';

export function createTokenDetailsStore(db: Knex): TokenDetailsStore {
  async function recordOf(sessionId: string) {
    const row = await db<Row>(TABLE).where({ session_id: sessionId }).first();
    if (!row) return undefined;
    const reach = { ...reachOfRow(row), realm: row.realm };
    // A name alone narrows nothing, yet the caller's record names its job credential.
    return { reach: narrows(reach) || reach.name !== undefined ? reach : undefined };
  }

  return {
    async record(details) {
      try {
        await db(TABLE)
          .insert({
            session_id: details.sessionId,
            realm: details.realm,
            user_id: details.userId,
            name: details.name ?? null,
            workspaces: details.workspaces === undefined ? null : toJsonb(details.workspaces),
            read_only: details.readOnly,
            expires_at: details.expiresAt === undefined ? null : new Date(details.expiresAt),
          })
          // A session id is new at issuance; a row there is a use noted by a replica that saw
          // the session first, which the details complete.
          .onConflict('session_id')
          .merge(['name', 'workspaces', 'read_only', 'expires_at']);
        return 'recorded';
      } catch (err) {
        if ((err as { code?: unknown }).code === UNIQUE_VIOLATION) return 'nameTaken';
        throw err;
      }
    },
    async reachOf(sessionId) {
      return (await recordOf(sessionId))?.reach;
    },
    recordOf,
    async noteUse(session, use, minIntervalMs) {
      const at = new Date(use.at);
      const since = new Date(use.at - minIntervalMs);
      const usage = {
        last_used_at: at,
        last_used_address: use.address,
        last_used_agent: use.userAgent?.slice(0, 512) ?? null,
      };
      await db(TABLE)
        .insert({
          session_id: session.sessionId,
          realm: session.realm,
          user_id: session.userId,
          ...usage,
        })
        .onConflict('session_id')
        .merge(usage)
        .where(function () {
          void this.whereNull(`${TABLE}.last_used_at`).orWhere(`${TABLE}.last_used_at`, '<', since);
        });
    },
    async ofUser(realm, userId) {
      const rows = await db<Row>(TABLE).where({ realm, user_id: userId });
      return rows.map(detailsOfRow);
    },
    async forget(realm, userId, sessionIds) {
      if (sessionIds.length === 0) return;
      await db(TABLE).where({ realm, user_id: userId }).whereIn('session_id', sessionIds).del();
    },
  };
}
