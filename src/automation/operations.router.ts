import { z } from 'zod';
import { routeFor } from '../http/route-table.ts';
import { organizationId, workspaceId } from '../tenancy/id-schemas.ts';
import type { OperationsRepo } from './operations.repo.ts';
import { operationRecord } from './operations.schemas.ts';

const route = routeFor<OperationsRepo>({ metricsClass: 'list' });

/**
 * `GET /api/<org>/workspaces/<ws>/ita/menu/operation_list/filter/` (spec 4.4): every operation
 * of the workspace, behind the workspace-role check. The admission has checked both ids, so
 * their schemas only document them; its refusals (auth/admission.ts) are its only ones.
 */
export const operationsRoutes = [
  route({
    method: 'get',
    path: '/api/{organization_id}/workspaces/{workspace_id}/ita/menu/operation_list/filter/',
    operationId: 'listOperations',
    summary: 'All operations of a workspace (role `<ws>` required)',
    tags: ['automation'],
    params: { organization_id: { schema: organizationId }, workspace_id: { schema: workspaceId } },
    data: z.array(operationRecord),
    // As the forwarded route it stands in for.
    readsNoBody: true,
    handler: (operations, { realm, params }) =>
      operations.listByWorkspace(realm, String(params.workspace_id)),
  }),
];
