import { Router } from 'express';
import { principalOf } from '../edge/request-scope.ts';
import { success } from '../envelope/envelope.ts';
import type { Audit } from '../http/audit.ts';
import type { RefreshTokensService } from './refresh-tokens.service.ts';

/**
 * The caller's refresh tokens (spec 4.5, 4.6), mounted below
 * `/api/platform/users/_current/refresh_tokens` and `/api/<org>/platform/users/_current/refresh_tokens`.
 * `DELETE .../<id>` revokes one of them (beyond the spec).
 */
export function createRefreshTokensRouter(service: RefreshTokensService, audit: Audit): Router {
  const router = Router({ mergeParams: true, caseSensitive: true });
  router.get('/', async (req, res) => {
    res.json(success(await service.list(principalOf(req))));
  });
  router.delete(
    '/',
    audit.route(
      'refresh_tokens.revoke_all',
      () => ({}),
      async (req, res) => {
        await service.revokeAll(principalOf(req));
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
        await service.revokeOne(principalOf(req), String((req.params as { id?: string }).id));
        res.json(success(null));
      },
    ),
  );
  return router;
}
