import type { Knex } from 'knex';
import type { Principal } from '../tenancy/principal.ts';
import type { FailedLoginMemory } from '../auth/failed-logins.ts';
import type { AccountLocks } from '../auth/account-locks.ts';
import { revokeUsers, type RevocationList } from '../auth/revocation.ts';
import { AppError } from '../envelope/errors.ts';
import { isHttpStatus, isKeycloakNotFound, type KeycloakAdmin } from '../keycloak/admin-client.ts';
import type { AdminSession } from '../keycloak/admin-session.ts';
import {
  endSessions,
  listUsers,
  setWorkspaceRole,
  workspacesOfUsers,
  type KeycloakUser,
} from './realm-admin/users.ts';
import { createPlatformRecords } from './platform-records.ts';
import { createTokenRefusal } from './token-refusal.ts';
import { createChangeableUserLookup, requireUser } from './protected-accounts.ts';
import { isOneLine, validatePassword } from './user-input.ts';
import type { UserListQuery, UserRecord } from './users.schemas.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';

export interface UsersService {
  list(realm: string, query: UserListQuery): Promise<UserRecord[]>;
  get(realm: string, username: string): Promise<UserRecord>;
  /** Disabling also refuses the user's tokens at once and ends their Keycloak sessions. */
  setEnabled(
    realm: string,
    username: string,
    enabled: boolean,
    caller: Principal,
  ): Promise<UserRecord>;
  /** Refuses the user's tokens at once, then deletes the user; answers it as it was. */
  remove(realm: string, username: string, caller: Principal): Promise<UserRecord>;
  /** A new, permanent password; cached Basic logins stop at once, sessions stay. */
  setPassword(
    realm: string,
    username: string,
    password: string,
    caller: Principal,
  ): Promise<UserRecord>;
  /** Grants (`held`) or removes role `<ws>`; a removal refuses older tokens of the user at once. */
  setWorkspace(
    organizationId: string,
    username: string,
    workspaceId: string,
    held: boolean,
    caller: Principal,
  ): Promise<UserRecord>;
}

/**
 * The lifecycle of users in master and organization realms, through the bootstrap
 * administrator's admin session. Keycloak is the only store of users, so every call is one
 * idempotent step or a series of them that can be repeated after a failure half-way.
 */
export function createUsersService(deps: {
  adminSession: AdminSession;
  db: Knex;
  revocations: RevocationList;
  /** Keycloak's bootstrap administrator in master (config KEYCLOAK_ADMIN_USERNAME). */
  bootstrapAdmin: string;
  basicCacheSeconds: number;
  leewaySeconds: number;
  /** Wrong passwords remembered by the login throttle: a new password may be one of them. */
  failedLogins: Pick<FailedLoginMemory, 'passwordSet'>;
  /**
   * Keycloak's lockouts noted in this process: a new password is tried again at once here (an
   * administrator resets a locked user's password when unlocking it); other processes read the
   * lock again within LOCK_TRUSTED_MS.
   */
  accountLocks: Pick<AccountLocks, 'ended'>;
}): UsersService {
  const { adminSession } = deps;

  const { requireRealm, requireWorkspace } = createPlatformRecords(deps.db);

  const changeableUser = createChangeableUserLookup(deps.bootstrapAdmin);

  async function recordOf(admin: KeycloakAdmin, realm: string, user: KeycloakUser) {
    const [record] = await recordsOf(admin, realm, [user]);
    return record!;
  }

  const refuseTokens = createTokenRefusal(deps);

  /** Runs `work` on a user named by a path: a name no user can have is simply not found. */
  async function onUser<T>(
    realm: string,
    username: string,
    work: (admin: KeycloakAdmin) => Promise<T>,
  ): Promise<T> {
    if (username.length < 1 || username.length > 255 || !isOneLine(username)) {
      throw new AppError('userNotFound');
    }
    await requireRealm(realm);
    return adminSession.run(work);
  }

  return {
    async list(realm, query) {
      await requireRealm(realm);
      return adminSession.run(async (admin) =>
        recordsOf(admin, realm, await listUsers(admin, realm, query)),
      );
    },

    get(realm, username) {
      return onUser(realm, username, async (admin) =>
        recordOf(admin, realm, await requireUser(admin, realm, username)),
      );
    },

    setEnabled(realm, username, enabled, caller) {
      const change = enabled ? 'enable' : 'disable';
      return onUser(realm, username, async (admin) => {
        const user = await changeableUser(admin, realm, username, change, caller);
        await admin.users.update({ realm, id: user.id }, { enabled });
        if (!enabled) {
          // Keycloak refuses new logins and refreshes from now; the gateway refuses tokens it
          // verified already; the sessions end last, so a repeat after a failure redoes it all.
          await refuseTokens(admin, realm, [user.id]);
          await endSessions(admin, realm, user.id);
        }
        return recordOf(admin, realm, { ...user, enabled });
      });
    },

    remove(realm, username, caller) {
      return onUser(realm, username, async (admin) => {
        const user = await changeableUser(admin, realm, username, 'delete', caller);
        const record = await recordOf(admin, realm, user);
        await refuseTokens(admin, realm, [user.id]);
        await admin.users.del({ realm, id: user.id }).catch((err: unknown) => {
          // Deleted by a concurrent call in between: the outcome asked for (Keycloak's own 404,
          // not a proxy's while Keycloak is away).
          if (!isKeycloakNotFound(err)) throw err;
        });
        return record;
      });
    },

    setPassword(realm, username, password, caller) {
      validatePassword(password);
      return onUser(realm, username, async (admin) => {
        const user = await changeableUser(admin, realm, username, 'password', caller);
        await refusedAsBadRequest(() =>
          admin.users.resetPassword({
            realm,
            id: user.id,
            credential: { type: 'password', value: password, temporary: false },
          }),
        );
        // Cached Basic logins with the old password stop; Bearer sessions stay (as in Keycloak).
        await revokeUsers(
          deps.revocations,
          realm,
          { userId: user.id },
          { basicSeconds: deps.basicCacheSeconds },
        );
        deps.accountLocks.ended(realm, user.username ?? username);
        await deps.failedLogins.passwordSet(realm, user.username ?? username);
        return recordOf(admin, realm, user);
      });
    },

    setWorkspace(organizationId, username, workspaceId, held, caller) {
      return onUser(organizationId, username, async (admin) => {
        await requireWorkspace(organizationId, workspaceId);
        const user = await changeableUser(admin, organizationId, username, 'workspace', caller);
        if (!(await setWorkspaceRole(admin, organizationId, user.id, workspaceId, held))) {
          throw new AppError('workspaceNotFound');
        }
        if (!held) {
          // Its direct role gone, the user may still hold it through a group or a composite
          // role set in Keycloak, which its next token would carry: not done, and said so.
          const still = (await workspacesOfUsers(admin, organizationId, [user.id])).get(user.id);
          if (still?.includes(workspaceId)) throw new AppError('workspaceHeldElsewhere');
          await refuseTokens(admin, organizationId, [user.id]);
        }
        return recordOf(admin, organizationId, user);
      });
    },
  };
}

async function recordsOf(
  admin: KeycloakAdmin,
  realm: string,
  users: KeycloakUser[],
): Promise<UserRecord[]> {
  const held =
    realm === MASTER_REALM
      ? undefined
      : await workspacesOfUsers(
          admin,
          realm,
          users.map((user) => user.id),
        );
  return users.map((user) => ({
    id: user.id,
    username: user.username,
    enabled: user.enabled !== false,
    realm,
    ...(held && { workspaces: held.get(user.id) ?? [] }),
    created_timestamp:
      user.createdTimestamp === undefined ? null : new Date(user.createdTimestamp).toISOString(),
  }));
}

/** Keycloak's password policy has the last word; its 400 names the rule, never the value. */
async function refusedAsBadRequest(work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (err) {
    if (!isHttpStatus(err, 400)) throw err;
    const data = (err as { responseData?: Record<string, unknown> }).responseData ?? {};
    const reason = [data.error_description, data.errorMessage, data.error].find(
      (value): value is string => typeof value === 'string',
    );
    throw new AppError('badRequestBody', {
      message: `Keycloak refused the password: ${reason ?? 'invalid password'}`,
      cause: err,
    });
  }
}
