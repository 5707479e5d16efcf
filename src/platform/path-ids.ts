import { Router } from 'express';
import { AppError } from '../envelope/errors.ts';
import { isOrganizationId, isWorkspaceId } from '../tenancy/identifiers.ts';

/**
 * A router of the platform API whose `:org` and `:ws` path ids are checked against their
 * alphabet: an id outside it names nothing, so it is 404 before any database or Keycloak call.
 */
export function platformRouter(): Router {
  // Paths match as written, as the edge reads them (edge/route.ts).
  const router = Router({ caseSensitive: true });
  router.param('org', (_req, _res, next, id: string) => {
    next(isOrganizationId(id) ? undefined : new AppError('organizationNotFound'));
  });
  router.param('ws', (_req, _res, next, id: string) => {
    next(isWorkspaceId(id) ? undefined : new AppError('workspaceNotFound'));
  });
  return router;
}
