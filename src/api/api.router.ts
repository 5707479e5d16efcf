import express, { Router, type RequestHandler } from 'express';
import { admitApiRequests, type Admission } from '../auth/admission.ts';
import { scopeOf } from '../edge/request-scope.ts';
import type { RouteDeclaration } from '../edge/route.ts';
import type { Audit } from '../http/audit.ts';
import type { OperationsRepo } from '../automation/operations.repo.ts';
import { operationsRoutes } from '../automation/operations.router.ts';
import { serveTable, type ServedTable } from '../http/route-table.ts';
import { OPENAPI_ROUTE } from './api-routes.ts';
import { openApiDocument } from './openapi.ts';
import { listingRoutes } from '../platform/listing.router.ts';
import type { OrganizationsRepo } from '../platform/organizations.repo.ts';
import { refreshTokensRoutes } from '../platform/refresh-tokens.router.ts';
import type { RefreshTokensService } from '../platform/refresh-tokens.service.ts';
import type { WorkspacesRepo } from '../platform/workspaces.repo.ts';

export interface ApiDeps {
  admission: Admission;
  refreshTokens: RefreshTokensService;
  audit: Audit;
  organizations: OrganizationsRepo;
  workspaces: WorkspacesRepo;
  operations: OperationsRepo;
  /** Administrators' routes under `/api/platform`, with their services (platform.router.ts). */
  platformTables: ServedTable[];
  /** False when the automation route is forwarded (see automation/forward-route.ts). */
  builtInOperations: boolean;
}

/** JSON bodies of API calls are small; this bounds what a client can make us parse. */
const MAX_JSON_BODY = '64kb';

/**
 * Everything under `/api` that is not forwarded: the admission (realm, credentials, workspace
 * role; see auth/admission.ts), then the handler of the table entry the edge matched
 * (edge/route.ts): nothing here reads the path again. A path no entry serves is 404 once the
 * caller is admitted. (A forwarded automation route never gets here: the edge hands it to the
 * forward route, which runs the same admission.)
 */
export function createApiRouter(deps: ApiDeps): Router {
  const json = express.json({ limit: MAX_JSON_BODY });
  const handlers = new Map<RouteDeclaration, RequestHandler>();
  const serve = (tables: ServedTable[], readsBody: boolean) => {
    for (const table of tables) {
      for (const route of table.routes) {
        const handler = table.handlerOf(route, deps.audit);
        handlers.set(
          route,
          readsBody
            ? (req, res, next) =>
                json(req, res, (err?: unknown) => (err ? next(err) : handler(req, res, next)))
            : handler,
        );
      }
    }
  };
  // A body is read (and refused when malformed) on every route but the automation route's own.
  serve(
    [
      serveTable(listingRoutes, deps),
      serveTable(refreshTokensRoutes, deps.refreshTokens),
      ...deps.platformTables,
    ],
    true,
  );
  if (deps.builtInOperations) serve([serveTable(operationsRoutes, deps.operations)], false);
  // The API's own description needs no credentials and names no realm.
  handlers.set(OPENAPI_ROUTE, (_req, res) => {
    res.json(openApiDocument);
  });
  return Router().use(admitApiRequests(deps.admission), (req, res, next) => {
    const { entry, realm } = scopeOf(req).route;
    const handler = entry && handlers.get(entry);
    if (handler) handler(req, res, next);
    // No entry: 404, after the body of an admitted request is read as on every route.
    else if (realm !== undefined) json(req, res, next);
    else next();
  });
}
