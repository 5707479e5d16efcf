import type { Knex } from 'knex';
import { AppError } from '../envelope/errors.ts';
import { isOrganizationId, isWorkspaceId, MASTER_REALM } from '../tenancy/identifiers.ts';
import { createOrganizationsRepo } from './organizations.repo.ts';
import type { Organization, Workspace } from './organizations.schemas.ts';
import { createWorkspacesRepo } from './workspaces.repo.ts';

/**
 * The records the administrators' calls act on, or their 404: an id outside its alphabet names
 * nothing and is refused before the database is asked. One set of checks for provisioning and
 * the organization, workspace and user lifecycles.
 */
export function createPlatformRecords(db: Knex) {
  const organizations = createOrganizationsRepo(db);
  const workspaces = createWorkspacesRepo(db);

  /** The organization, or 404 `404-00001`. */
  async function requireOrganization(organizationId: string): Promise<Organization> {
    if (!isOrganizationId(organizationId)) throw new AppError('organizationNotFound');
    const organization = await organizations.find(organizationId);
    if (!organization) throw new AppError('organizationNotFound');
    return organization;
  }

  /** The workspace of an organization, or 404 `404-00002`. */
  async function requireWorkspace(organizationId: string, workspaceId: string): Promise<Workspace> {
    if (!isWorkspaceId(workspaceId)) throw new AppError('workspaceNotFound');
    const workspace = await workspaces.find(organizationId, workspaceId);
    if (!workspace) throw new AppError('workspaceNotFound');
    return workspace;
  }

  /** `master` or an organization known to the database; else 404 `404-00001`. */
  async function requireRealm(realm: string): Promise<void> {
    if (realm !== MASTER_REALM) await requireOrganization(realm);
  }

  return { requireOrganization, requireWorkspace, requireRealm };
}
