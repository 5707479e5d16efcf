import { Router } from 'express';
import { workspaceRolesOf } from '../auth/authorize.ts';
import { principalOf } from '../auth/principal.ts';
import { success } from '../envelope/envelope.ts';
import type { OrganizationsRepo } from './organizations.repo.ts';
import type { WorkspacesRepo } from './workspaces.repo.ts';

/**
 * The platform's list endpoints, mounted at `/api` behind realm routing and authentication:
 * `GET /platform/organizations` (spec 4.2, administrators) and
 * `GET /<org>/platform/workspaces` (spec 4.3, only workspaces the caller has a role for).
 */
export function createListingRouter(repos: {
  organizations: OrganizationsRepo;
  workspaces: WorkspacesRepo;
}): Router {
  const router = Router();
  router.get('/platform/organizations', async (_req, res) => {
    res.json(success(await repos.organizations.list()));
  });
  router.get('/:org/platform/workspaces', async (_req, res) => {
    const principal = principalOf(res);
    const allowed = new Set(workspaceRolesOf(principal));
    const all = await repos.workspaces.listByOrganization(principal.realm);
    res.json(success(all.filter((workspace) => allowed.has(workspace.id))));
  });
  return router;
}
