import type { LoginBlock } from './account-locks.ts';

/**
 * What the auth layers ask Keycloak's admin API about a realm's accounts and sessions. Declared
 * here, where it is used; the platform implements it with its admin-API operations
 * (platform/realm-admin/account-admin.ts), which sit above the auth layers.
 */
export interface AccountAdmin {
  /**
   * Whether the user has a one-time password (Basic cannot carry it), and whether Keycloak's
   * brute-force detection locks the user for now, until when: what a refused password login
   * may owe to something else than its password (account-locks.ts).
   */
  loginBlockOf(realm: string, username: string): Promise<LoginBlock>;
  /**
   * The user name of the one user with the e-mail `email` (as Keycloak logs it in by e-mail),
   * if there is exactly one.
   */
  usernameOfEmail(realm: string, email: string): Promise<string | undefined>;
  /** Whether Keycloak logs the realm's users in by e-mail too (its `loginWithEmailAllowed`). */
  loginWithEmailAllowed(realm: string): Promise<boolean>;
  /** The user name of a user id, if the user exists. */
  usernameOf(realm: string, userId: string): Promise<string | undefined>;
  /** The longest an access token of the realm can live, in seconds (its clients included). */
  longestAccessTokenSeconds(realm: string): Promise<number>;
  /**
   * The ids of the members of a group and of the groups below it: who loses roles with a role
   * taken from it or its deletion (auth-proxy/end-access.ts); undefined when they are more than
   * a bounded number of admin calls read.
   */
  groupMembers(realm: string, groupId: string): Promise<string[] | undefined>;
  /**
   * A role of the realm as tokens name it (`client`: its client's id, absent for a realm role),
   * from its name (and client UUID) or its id; undefined when there is none.
   */
  roleOf(
    realm: string,
    role: { name: string; clientUuid?: string } | { id: string },
  ): Promise<{ client?: string; name: string } | undefined>;
  /**
   * The roles of a client (by its UUID) as tokens name them (`client`: its client id); none when
   * there is no such client.
   */
  clientRolesOf(realm: string, clientUuid: string): Promise<{ client: string; name: string }[]>;
  /** Whether the realm's API client requires DPoP (an organization's switch): resource-metadata.ts. */
  dpopRequired(realm: string): Promise<boolean>;
  /** Ends an offline session (a refresh token the gateway refused to hand out). */
  endOfflineSession(realm: string, sessionId: string): Promise<void>;
  /**
   * Of the user's sessions `sessionIds`, those Keycloak has ended: in none of its lists (the
   * API client's offline sessions, the user's online sessions, other clients' offline sessions).
   */
  endedSessions(realm: string, userId: string, sessionIds: readonly string[]): Promise<string[]>;
}
