import type { Knex } from 'knex';
import { createOperationsRepo } from '../automation/operations.repo.ts';
import { AppError } from '../envelope/errors.ts';
import { createChangeSlots } from './change-slots.ts';
import type { AdminSession } from '../keycloak/admin-session.ts';
import {
  deleteOrganizationRealm,
  deleteWorkspaceRoles,
  realmExists,
  setOrganizationRealmEnabled,
  workspaceRolesOf,
} from './realm-admin/realm-lifecycle.ts';
import type { OrganizationEvents } from './organization-events.ts';
import { createOrganizationsRepo } from './organizations.repo.ts';
import type { Organization, Workspace } from './organizations.schemas.ts';
import { createPlatformRecords } from './platform-records.ts';
import { longestAccessTokenSeconds } from './realm-admin/users.ts';
import { MAX_LIFETIME_SECONDS } from './realm-admin/token-lifetimes.ts';
import type { RefuseRealmTokens, RefuseRoleTokens } from './token-refusal.ts';
import { createWorkspacesRepo } from './workspaces.repo.ts';

/** The `status` texts an organization's record carries after each change. */
export const ORGANIZATION_STATUS = {
  enabled: 'Organization Enable Complete',
  disabled: 'Organization Disable Complete',
} as const;

/**
 * Organization disables and enables one process runs at once, each holding a database connection
 * for a Keycloak call: a few, out of the pool's DATABASE_POOL_SIZE.
 */
const ORGANIZATION_CHANGES_AT_ONCE = 2;

export interface OrganizationLifecycle {
  getOrganization(organizationId: string): Promise<Organization>;
  /** `confirm` must repeat the id (`?confirm=<org>`); answers the deleted record. */
  deleteOrganization(organizationId: string, confirm: unknown): Promise<Organization>;
  setOrganizationEnabled(organizationId: string, enabled: boolean): Promise<Organization>;
  listWorkspaces(organizationId: string): Promise<Workspace[]>;
  /** Answers the deleted record. */
  deleteWorkspace(organizationId: string, workspaceId: string): Promise<Workspace>;
}

/**
 * Reads, suspends and deletes organizations and workspaces. Keycloak goes first, then the
 * database, then every replica is told (`announce`): a call that failed half-way finds the
 * rows still there and can be repeated, each Keycloak step taking "already gone" as done.
 */
export function createOrganizationLifecycle(deps: {
  adminSession: AdminSession;
  db: Knex;
  announce: OrganizationEvents['announce'];
  /** Makes the tokens carrying a deleted workspace's roles void (see token-refusal.ts). */
  refuseRoleTokens: RefuseRoleTokens;
  /** Makes a deleted organization's tokens and cached Basic logins void (see token-refusal.ts). */
  refuseRealmTokens: RefuseRealmTokens;
}): OrganizationLifecycle {
  const { adminSession, db } = deps;
  const workspaces = createWorkspacesRepo(db);

  const { requireOrganization, requireWorkspace } = createPlatformRecords(db);
  const changeSlots = createChangeSlots(ORGANIZATION_CHANGES_AT_ONCE);

  return {
    getOrganization: requireOrganization,

    async deleteOrganization(organizationId, confirm) {
      // Checked first and on its own: a typo in the path must never delete another organization.
      if (confirm !== organizationId) throw new AppError('organizationDeleteUnconfirmed');
      const organization = await requireOrganization(organizationId);
      await adminSession.run(async (admin) => {
        // Read while the realm exists. A repeated delete, or a twin's (another replica, a retry)
        // that takes the realm meanwhile, finds it gone: the refusal then lasts as long as the
        // longest lifetime the API lets a realm have.
        const lifetime = await longestAccessTokenSeconds(admin, organizationId).catch(
          async (err: unknown) => {
            if (await realmExists(admin, organizationId)) throw err;
            return MAX_LIFETIME_SECONDS;
          },
        );
        await deleteOrganizationRealm(admin, organizationId);
        // The id may name a new organization at once: same issuer, perhaps the same usernames,
        // so nothing the old realm issued (or a replica verified for it) may pass there.
        await deps.refuseRealmTokens(organizationId, lifetime);
      });
      await db.transaction(async (trx) => {
        await createOperationsRepo(trx).deleteAll(organizationId);
        await createWorkspacesRepo(trx).deleteAll(organizationId);
        await createOrganizationsRepo(trx).delete(organizationId);
      });
      await deps.announce({ organizationId, state: 'absent' });
      return organization;
    },

    async setOrganizationEnabled(organizationId, enabled) {
      await requireOrganization(organizationId);
      const status = enabled ? ORGANIZATION_STATUS.enabled : ORGANIZATION_STATUS.disabled;
      // One change of an organization at a time, on every replica: its row stays locked from
      // before Keycloak's change to the record's, so a disable and an enable at once cannot
      // leave the realm one way and the record the other. The session logs in before the lock
      // is taken: the lock, and the connection, are held for one Keycloak call at most, which
      // KEYCLOAK_TIMEOUT_MS bounds; a change waiting for the lock waits no longer than
      // DATABASE_STATEMENT_TIMEOUT_MS (then 503 `503-00003`), having changed nothing. Only
      // ORGANIZATION_CHANGES_AT_ONCE such connections per process: a slow Keycloak must not
      // take the pool every other request needs; the changes beyond wait without one.
      const organization = await changeSlots(() =>
        adminSession.run((admin) =>
          db.transaction(async (trx) => {
            const records = createOrganizationsRepo(trx);
            if (!(await records.lock(organizationId))) throw new AppError('organizationNotFound');
            // An absent realm (a delete that stopped half-way) has nothing to change; the row does.
            await setOrganizationRealmEnabled(admin, organizationId, enabled);
            return records.setEnabled(organizationId, enabled, status);
          }),
        ),
      );
      if (!organization) throw new AppError('organizationNotFound');
      // After the commit, outside the lock: a change committed after this one may be announced
      // first. Each replica reads the organization again on every change it applies
      // (platform.area.ts), so the state committed last is the one every replica keeps.
      await deps.announce({ organizationId, state: enabled ? 'enabled' : 'disabled' });
      return organization;
    },

    async listWorkspaces(organizationId) {
      await requireOrganization(organizationId);
      return workspaces.listByOrganization(organizationId);
    },

    async deleteWorkspace(organizationId, workspaceId) {
      await requireOrganization(organizationId);
      const workspace = await requireWorkspace(organizationId, workspaceId);
      await adminSession.run(async (admin) => {
        // Tokens carry the roles until they expire, whoever holds them and however (a group, a
        // composite), and would reach a workspace created again under the id: those carrying
        // them are refused before the roles go, and again after, for a token refreshed between.
        const roles = await workspaceRolesOf(admin, organizationId, workspaceId);
        await deps.refuseRoleTokens(admin, organizationId, roles);
        await deleteWorkspaceRoles(admin, organizationId, workspaceId);
        await deps.refuseRoleTokens(admin, organizationId, roles);
      });
      await db.transaction(async (trx) => {
        await createOperationsRepo(trx).deleteAll(organizationId, workspaceId);
        await createWorkspacesRepo(trx).deleteAll(organizationId, workspaceId);
      });
      return workspace;
    },
  };
}
