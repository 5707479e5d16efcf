import express, { Router } from 'express';
import type { Logger } from 'pino';
import { authenticate, type AuthenticateDeps } from './auth/authenticate.ts';
import { requireWorkspaceRole } from './auth/authorize.ts';
import { routeRealm } from './auth/realm-routing.ts';
import { createAutomationProxy } from './automation/automation-proxy.ts';
import type { OperationsRepo } from './automation/operations.repo.ts';
import { createOperationsRouter } from './automation/operations.router.ts';
import { openApiDocument } from './http/openapi.ts';
import { createListingRouter } from './platform/listing.router.ts';
import type { OrganizationDirectory } from './platform/organization-directory.ts';
import type { OrganizationsRepo } from './platform/organizations.repo.ts';
import { createRefreshTokensRouter } from './platform/refresh-tokens.router.ts';
import type { RefreshTokensService } from './platform/refresh-tokens.service.ts';
import type { WorkspacesRepo } from './platform/workspaces.repo.ts';

export interface ApiDeps extends AuthenticateDeps {
  refreshTokens: RefreshTokensService;
  organizationDirectory: OrganizationDirectory;
  organizations: OrganizationsRepo;
  workspaces: WorkspacesRepo;
  operations: OperationsRepo;
  /** Administrators' provisioning routes under `/api/platform`. */
  platformRouter: Router;
  automationUpstream?: { url: string; timeoutMs: number };
  logger: Logger;
}

/** JSON bodies of API calls are small; this bounds what a client can make us parse. */
const MAX_JSON_BODY = '64kb';

/**
 * Everything under `/api`: realm from the path, then authentication, then the routes.
 * The automation route comes before the JSON parser so that forwarded bodies stream through.
 */
export function createApiRouter(deps: ApiDeps): Router {
  const router = Router();
  // The API's own description needs no credentials and names no realm.
  router.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument);
  });
  router.use(routeRealm(deps.organizationDirectory));
  router.use(authenticate(deps));

  const workspaceRoutes = Router({ mergeParams: true });
  workspaceRoutes.use(requireWorkspaceRole(deps.workspaces));
  if (deps.automationUpstream) {
    workspaceRoutes.use(
      '/ita',
      createAutomationProxy({
        upstreamUrl: deps.automationUpstream.url,
        timeoutMs: deps.automationUpstream.timeoutMs,
        logger: deps.logger,
      }),
    );
  } else {
    workspaceRoutes.use(createOperationsRouter(deps.operations));
  }
  router.use('/:org/workspaces/:ws', workspaceRoutes);

  router.use(express.json({ limit: MAX_JSON_BODY }));
  router.use(
    createListingRouter({ organizations: deps.organizations, workspaces: deps.workspaces }),
  );
  router.use(
    ['/platform/users/_current/refresh_tokens', '/:org/platform/users/_current/refresh_tokens'],
    createRefreshTokensRouter(deps.refreshTokens),
  );
  router.use('/platform', deps.platformRouter);
  return router;
}
