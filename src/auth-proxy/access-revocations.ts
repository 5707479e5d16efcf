import type { Logger } from 'pino';
import { revokeUsers, type RevocationList } from '../auth/revocation.ts';
import { within } from '../time/within.ts';

/**
 * When a realm's token lifetime cannot be read (the admin API failing): refusals last a day,
 * longer than any access token a realm would issue.
 */
const UNKNOWN_LIFETIME_SECONDS = 24 * 3600;
/**
 * The most users one revocation names (a group's members): some 40 KB of ids, so that a group of
 * any size is a few messages between replicas and a few stored keys, none of them large.
 */
export const MAX_USERS_PER_REVOCATION = 1000;

export interface AccessRevocationsDeps {
  revocations: RevocationList;
  /** The longest an access token of the realm lives (the realm's and its clients' settings). */
  accessTokenSeconds: (realm: string) => Promise<number>;
  leewaySeconds: number;
  /** How long a cached Basic login lives: how long its user's revocation must be kept. */
  basicCacheSeconds: number;
  logger: Logger;
}

/** A revocation made ready (its lifetime read): applying it is one call to the shared list. */
export type PreparedRevocation = () => Promise<void>;

/**
 * The revocations that end a Keycloak session or a user's access at the gateway, through the
 * shared revocation list (every replica at once): one writing of each, for what passes through
 * `/auth` (end-access.ts), what Keycloak announces (backchannel-logout.ts), and the sessions
 * Keycloak ended unannounced whose records are dropped (a job credential's name freed, the
 * refresh-token list). Each is prepared first (the realm's token lifetime read afresh:
 * `tokenLifetimeOf`) and applied by the function it resolves to.
 */
export function createAccessRevocations(deps: AccessRevocationsDeps) {
  // Per realm: the read in flight, and the one queued to start when it ends.
  const reads = new Map<string, { done: Promise<unknown>; next?: Promise<number> }>();
  const basicSeconds = Math.max(deps.basicCacheSeconds, 1);

  /**
   * How long a refusal of the realm's tokens must last, read from Keycloak for each ending and
   * never remembered: an administrator may have lengthened the lifetime a moment ago (through
   * realmgate's API or in Keycloak's console, which the gateway does not see), and a refusal
   * sized by an older, shorter value would expire while tokens issued since still live. An
   * ending is prepared before Keycloak is asked to act, never on the request path of the API, so
   * one admin read each is affordable. Endings arriving together share reads: one that comes
   * while a read is in flight waits for the next one, which starts when that ends and serves
   * every ending queued behind it (a user of hundreds of sessions logged out: two reads), so
   * each is answered from a read begun after it came.
   */
  function tokenLifetimeOf(realm: string): Promise<number> {
    const reading = reads.get(realm);
    if (reading) return (reading.next ??= reading.done.then(() => startRead(realm)));
    return startRead(realm);
  }

  function startRead(realm: string): Promise<number> {
    const seconds = deps.accessTokenSeconds(realm).then(
      (value) => value + deps.leewaySeconds,
      (err: unknown) => {
        deps.logger.warn({ err, realm }, 'token lifetime unreadable; refusals last a day');
        return UNKNOWN_LIFETIME_SECONDS;
      },
    );
    const entry: { done: Promise<unknown>; next?: Promise<number> } = {
      done: seconds.finally(() => {
        if (reads.get(realm) === entry) reads.delete(realm);
      }),
    };
    reads.set(realm, entry);
    return seconds;
  }

  /**
   * As `tokenLifetimeOf`, but no longer than `waitMs` when given: past it, a day (longer than any
   * token lives, so nothing is refused too briefly), and the read goes on for the next ending.
   */
  function lifetimeWithin(realm: string, waitMs: number | undefined): Promise<number> {
    const seconds = tokenLifetimeOf(realm);
    if (waitMs === undefined) return seconds;
    return within(seconds, waitMs, () => UNKNOWN_LIFETIME_SECONDS);
  }

  return {
    tokenLifetimeOf,
    basicSeconds,
    /**
     * The realm's longest lifetime, read before an administrator's change that may shorten it,
     * remembered on every replica (`rememberFormerLifetime`): a refusal made after still lasts
     * as long as a token issued before. Read as any ending's (a day when unreadable: longer
     * than any token lives, so nothing is kept too briefly).
     */
    keepFormerLifetime: async (realm: string): Promise<PreparedRevocation> => {
      const seconds = await tokenLifetimeOf(realm);
      return () => deps.revocations.rememberFormerLifetime(realm, seconds);
    },
    /**
     * Keycloak sessions of one user (ended, or ending): their tokens, and the Basic logins cached
     * on them, are refused. With `waitMs`, prepared within it even while Keycloak's admin API is
     * slow (`lifetimeWithin`).
     */
    endSessions: async (
      realm: string,
      sessionIds: readonly string[],
      userId = '',
      waitMs?: number,
    ): Promise<PreparedRevocation> => {
      const ttlSeconds = await lifetimeWithin(realm, waitMs);
      return () =>
        deps.revocations.revoke({
          realm,
          userId,
          sessionIds: [...sessionIds],
          ttlSeconds,
          userTtlSeconds: 0,
        });
    },
    /**
     * A user's access: the user's cached Basic logins, and with `tokens` every token of the user
     * issued before now (every session). `waitMs` as for `endSessions`.
     */
    endUser: async (
      realm: string,
      userId: string,
      tokens: boolean,
      waitMs?: number,
    ): Promise<PreparedRevocation> => {
      const tokenTtlSeconds = tokens ? await lifetimeWithin(realm, waitMs) : undefined;
      return () =>
        revokeUsers(deps.revocations, realm, { userId }, { basicSeconds, tokenTtlSeconds });
    },
    /**
     * As `endUser` with `tokens` for each of `userIds` (a group's members), in one revocation per
     * `MAX_USERS_PER_REVOCATION` of them: every replica refuses each member's tokens and cached
     * Basic logins as it would the user's alone, from a handful of messages.
     */
    endUsers: async (realm: string, userIds: readonly string[]): Promise<PreparedRevocation> => {
      const tokenTtlSeconds = userIds.length > 0 ? await tokenLifetimeOf(realm) : 0;
      return async () => {
        for (let from = 0; from < userIds.length; from += MAX_USERS_PER_REVOCATION) {
          const part = userIds.slice(from, from + MAX_USERS_PER_REVOCATION);
          await revokeUsers(
            deps.revocations,
            realm,
            { userIds: part },
            { basicSeconds, tokenTtlSeconds },
          );
        }
      };
    },
  };
}

export type AccessRevocations = ReturnType<typeof createAccessRevocations>;

/**
 * `endSessions` prepared and applied at once, for a caller with nothing to do between the two:
 * the tokens of sessions Keycloak ended are refused on every replica.
 */
export type RefuseEndedSessions = (
  realm: string,
  sessionIds: readonly string[],
  userId: string,
  waitMs?: number,
) => Promise<void>;
