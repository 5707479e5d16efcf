import type { Knex } from 'knex';
import { createOperationsRepo } from '../automation/operations.repo.ts';
import { AppError } from '../envelope/errors.ts';
import type { AdminSession } from '../keycloak/admin-session.ts';
import { isOrganizationId, isWorkspaceId } from '../keycloak/identifiers.ts';
import {
  deleteOrganizationRealm,
  deleteWorkspaceRoles,
  setOrganizationRealmEnabled,
} from '../keycloak/realm-lifecycle.ts';
import type { OrganizationEvents } from './organization-events.ts';
import { createOrganizationsRepo, type Organization } from './organizations.repo.ts';
import { createWorkspacesRepo, type Workspace } from './workspaces.repo.ts';

/** The `status` texts an organization's record carries after each change. */
export const ORGANIZATION_STATUS = {
  enabled: 'Organization Enable Complete',
  disabled: 'Organization Disable Complete',
} as const;

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
}): OrganizationLifecycle {
  const { adminSession, db } = deps;
  const organizations = createOrganizationsRepo(db);
  const workspaces = createWorkspacesRepo(db);

  async function requireOrganization(organizationId: string): Promise<Organization> {
    if (!isOrganizationId(organizationId)) throw new AppError('organizationNotFound');
    const organization = await organizations.find(organizationId);
    if (!organization) throw new AppError('organizationNotFound');
    return organization;
  }

  return {
    getOrganization: requireOrganization,

    async deleteOrganization(organizationId, confirm) {
      // Checked first and on its own: a typo in the path must never delete another organization.
      if (confirm !== organizationId) throw new AppError('organizationDeleteUnconfirmed');
      const organization = await requireOrganization(organizationId);
      await adminSession.run((admin) => deleteOrganizationRealm(admin, organizationId));
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
      // An absent realm (a delete that stopped half-way) has nothing to change; the row does.
      await adminSession.run((admin) =>
        setOrganizationRealmEnabled(admin, organizationId, enabled),
      );
      const status = enabled ? ORGANIZATION_STATUS.enabled : ORGANIZATION_STATUS.disabled;
      const organization = await organizations.setEnabled(organizationId, enabled, status);
      if (!organization) throw new AppError('organizationNotFound');
      await deps.announce({ organizationId, state: enabled ? 'enabled' : 'disabled' });
      return organization;
    },

    async listWorkspaces(organizationId) {
      await requireOrganization(organizationId);
      return workspaces.listByOrganization(organizationId);
    },

    async deleteWorkspace(organizationId, workspaceId) {
      await requireOrganization(organizationId);
      if (!isWorkspaceId(workspaceId)) throw new AppError('workspaceNotFound');
      const workspace = await workspaces.find(organizationId, workspaceId);
      if (!workspace) throw new AppError('workspaceNotFound');
      await adminSession.run((admin) => deleteWorkspaceRoles(admin, organizationId, workspaceId));
      await db.transaction(async (trx) => {
        await createOperationsRepo(trx).deleteAll(organizationId, workspaceId);
        await createWorkspacesRepo(trx).deleteAll(organizationId, workspaceId);
      });
      return workspace;
    },
  };
}
