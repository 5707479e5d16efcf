import { Router } from 'express';
import { principalOf } from '../auth/principal.ts';
import { success } from '../envelope/envelope.ts';
import type { Audit } from '../http/audit.ts';
import type { RefreshTokensService } from './refresh-tokens.service.ts';

/**
 * The caller's refresh tokens (spec 4.5, 4.6), mounted at
 * `/api/platform/users/_current/refresh_tokens` and `/api/<org>/platform/users/_current/refresh_tokens`.
 * `DELETE .../<id>` revokes one of them (beyond the spec).
 */
export function createRefreshTokensRouter(service: RefreshTokensService, audit: Audit): Router {
  const router = Router({ mergeParams: true });
  router.get('/', async (_req, res) => {
    res.json(success(await service.list(principalOf(res))));
  });
  router.delete(
    '/',
    audit.route(
      'refresh_tokens.revoke_all',
      () => ({}),
      async (_req, res) => {
        await service.revokeAll(principalOf(res));
        res.json(success(null));
      },
    ),
  );
  router.delete(
    '/:id',
    audit.route(
      'refresh_tokens.revoke',
      (req) => ({ session: String((req.params as { id?: string }).id) }),
      async (req, res) => {
        await service.revokeOne(principalOf(res), String((req.params as { id?: string }).id));
        res.json(success(null));
      },
    ),
  );
  return router;
}
