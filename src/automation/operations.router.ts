import { Router } from 'express';
import { principalOf, scopeOf } from '../edge/request-scope.ts';
import { success } from '../envelope/envelope.ts';
import type { OperationsRepo } from './operations.repo.ts';

/**
 * `GET /<org>/workspaces/<ws>/ita/menu/operation_list/filter/` (spec 4.4): every operation of
 * the workspace. Mounted below `/<org>/workspaces/<ws>`, behind the workspace-role check.
 */
export function createOperationsRouter(operations: OperationsRepo): Router {
  const router = Router({ caseSensitive: true });
  router.get('/ita/menu/operation_list/filter', async (req, res) => {
    const organization = principalOf(req).realm;
    const workspace = scopeOf(req).route.workspace ?? '';
    res.json(success(await operations.listByWorkspace(organization, workspace)));
  });
  return router;
}
