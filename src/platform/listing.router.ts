import type { RequestHandler } from 'express';
import { workspaceRolesOf } from '../auth/authorize.ts';
import { principalOf } from '../edge/request-scope.ts';
import { success } from '../envelope/envelope.ts';
import type { OrganizationsRepo } from './organizations.repo.ts';
import type { WorkspacesRepo } from './workspaces.repo.ts';

/**
 * The platform's list endpoints, served behind the admission on the routes the edge names
 * (edge/route.ts): `GET /api/platform/organizations` (spec 4.2, administrators) and
 * `GET /api/<org>/platform/workspaces` (spec 4.3, only workspaces the caller has a role for).
 */
export function createListing(repos: {
  organizations: OrganizationsRepo;
  workspaces: WorkspacesRepo;
}): { organizations: RequestHandler; workspaces: RequestHandler } {
  return {
    organizations: async (_req, res) => {
      res.json(success(await repos.organizations.list()));
    },
    workspaces: async (req, res) => {
      const principal = principalOf(req);
      const allowed = new Set(workspaceRolesOf(principal));
      const all = await repos.workspaces.listByOrganization(principal.realm);
      res.json(success(all.filter((workspace) => allowed.has(workspace.id))));
    },
  };
}
