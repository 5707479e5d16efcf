import express, { Router } from 'express';
import { admitApiRequests, type Admission } from './auth/admission.ts';
import type { Forwarding } from './edge/forwarding.ts';
import type { Audit } from './http/audit.ts';
import type { OperationsRepo } from './automation/operations.repo.ts';
import { createOperationsRouter } from './automation/operations.router.ts';
import { openApiDocument } from './http/openapi.ts';
import { createListingRouter } from './platform/listing.router.ts';
import type { OrganizationsRepo } from './platform/organizations.repo.ts';
import { createRefreshTokensRouter } from './platform/refresh-tokens.router.ts';
import type { RefreshTokensService } from './platform/refresh-tokens.service.ts';
import type { WorkspacesRepo } from './platform/workspaces.repo.ts';

export interface ApiDeps {
  admission: Admission;
  forwarding: Forwarding;
  refreshTokens: RefreshTokensService;
  audit: Audit;
  organizations: OrganizationsRepo;
  workspaces: WorkspacesRepo;
  operations: OperationsRepo;
  /** Administrators' provisioning routes under `/api/platform`. */
  platformRouter: Router;
  /** False when the automation route is forwarded (see automation/forward-route.ts). */
  builtInOperations: boolean;
}

/** JSON bodies of API calls are small; this bounds what a client can make us parse. */
const MAX_JSON_BODY = '64kb';

/**
 * Everything under `/api`: the admission (realm, credentials, workspace role; see
 * auth/admission.ts), then the routes. (A forwarded automation route never gets here: the edge
 * hands it to the forward route, which runs the same admission.)
 */
export function createApiRouter(deps: ApiDeps): Router {
  // Paths match as written, as the admission reads them (`/WORKSPACES/` is not `/workspaces/`).
  const router = Router({ caseSensitive: true });
  // The API's own description needs no credentials and names no realm.
  router.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument);
  });
  router.use(admitApiRequests(deps.admission, (req) => deps.forwarding.clientAddress(req)));

  if (deps.builtInOperations) {
    router.use('/:org/workspaces/:ws', createOperationsRouter(deps.operations));
  }

  router.use(express.json({ limit: MAX_JSON_BODY }));
  router.use(
    createListingRouter({ organizations: deps.organizations, workspaces: deps.workspaces }),
  );
  router.use(
    ['/platform/users/_current/refresh_tokens', '/:org/platform/users/_current/refresh_tokens'],
    createRefreshTokensRouter(deps.refreshTokens, deps.audit),
  );
  router.use('/platform', deps.platformRouter);
  return router;
}
