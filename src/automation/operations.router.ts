import { Router } from 'express';
import { principalOf } from '../auth/principal.ts';
import { success } from '../envelope/envelope.ts';
import type { OperationsRepo } from './operations.repo.ts';

/**
 * `GET /<org>/workspaces/<ws>/ita/menu/operation_list/filter/` (spec 4.4): every operation of
 * the workspace. Mounted behind the workspace-role check.
 */
export function createOperationsRouter(operations: OperationsRepo): Router {
  const router = Router({ mergeParams: true, caseSensitive: true });
  router.get('/ita/menu/operation_list/filter', async (req, res) => {
    const organization = principalOf(res).realm;
    res.json(
      success(
        await operations.listByWorkspace(organization, String((req.params as { ws?: string }).ws)),
      ),
    );
  });
  return router;
}
