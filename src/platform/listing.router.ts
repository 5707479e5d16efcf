import { z } from 'zod';
import { listsWorkspace } from '../auth/authorize.ts';
import { routeFor } from '../http/route-table.ts';
import { organizationRecord, workspaceRecord } from './organizations.schemas.ts';
import type { OrganizationsRepo } from './organizations.repo.ts';
import { pathIds } from './path-ids.ts';
import type { WorkspacesRepo } from './workspaces.repo.ts';

const route = routeFor<ListingRepos>({ metricsClass: 'list' });

export interface ListingRepos {
  organizations: OrganizationsRepo;
  workspaces: WorkspacesRepo;
}

/**
 * The workspace list's one filter, the reference platform's: the workspaces whose name is
 * exactly this (no pattern: `%`, `_` and `*` are the name's own; letter case kept). Absent or
 * empty, every one. Other parameters are ignored, as there.
 */
const workspaceListQuery = z.object({
  workspace_name: z.string().optional().meta({
    description: 'Only the workspaces of exactly this name; absent or empty: every one.',
  }),
});

/**
 * The platform's list endpoints, served behind the admission on the routes the edge names
 * (edge/route.ts): the organizations (spec 4.2, administrators) and an organization's
 * workspaces (spec 4.3, only those the caller has a role for, or all for an organization
 * manager, as compat.md says).
 */
export const listingRoutes = [
  route({
    method: 'get',
    path: '/api/platform/organizations',
    operationId: 'listOrganizations',
    summary: 'List organizations',
    tags: ['platform'],
    data: z.array(organizationRecord),
    handler: (repos) => repos.organizations.list(),
  }),
  route({
    method: 'get',
    path: '/api/{organization_id}/platform/workspaces',
    operationId: 'listWorkspaces',
    summary: 'Workspaces the caller has a role for (all for an organization manager)',
    description:
      'An organization manager (realm role `_og-ws-mt` or `_og-ws-role-mt`, as the reference ' +
      "platform's `_organization-manager` is made of) sees every workspace; entering one still " +
      'needs its role. A token narrowed at issuance shows only the workspaces it reaches.',
    tags: ['platform'],
    params: { organization_id: pathIds.callerOrganization },
    query: workspaceListQuery,
    data: z.array(workspaceRecord),
    handler: async (repos, { principal, query: { workspace_name: name } }) => {
      const all = await repos.workspaces.listByOrganization(principal.realm);
      return all.filter(
        (workspace) =>
          (!name || workspace.name === name) && listsWorkspace(principal, workspace.id),
      );
    },
  }),
];
