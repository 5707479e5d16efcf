import express, { Router, type RequestHandler } from 'express';
import { admitApiRequests, type Admission } from '../auth/admission.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import { scopeOf } from '../edge/request-scope.ts';
import type { RouteName } from '../edge/route.ts';
import type { Audit } from '../http/audit.ts';
import type { OperationsRepo } from '../automation/operations.repo.ts';
import { operationsRoutes } from '../automation/operations.router.ts';
import { mountRoutes } from '../http/route-table.ts';
import { openApiDocument } from './openapi.ts';
import { listingRoutes } from '../platform/listing.router.ts';
import type { OrganizationsRepo } from '../platform/organizations.repo.ts';
import { refreshTokensRoutes } from '../platform/refresh-tokens.router.ts';
import type { RefreshTokensService } from '../platform/refresh-tokens.service.ts';
import type { WorkspacesRepo } from '../platform/workspaces.repo.ts';

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

/** Where the API is mounted (app.ts); the route tables' paths start with it. */
export const API_PREFIX = '/api';

/** JSON bodies of API calls are small; this bounds what a client can make us parse. */
const MAX_JSON_BODY = '64kb';

/**
 * Everything under `/api`: the admission (realm, credentials, workspace role; see
 * auth/admission.ts), then the one router of the route the edge read from the path
 * (edge/route.ts): no other router sees the request. (A forwarded automation route never gets
 * here: the edge hands it to the forward route, which runs the same admission.)
 */
export function createApiRouter(deps: ApiDeps): Router {
  const json = express.json({ limit: MAX_JSON_BODY });
  // Paths match as written, as the edge reads them (`/WORKSPACES/` is not `/workspaces/`).
  const below = (prefix: string | string[], ...handlers: RequestHandler[]) =>
    Router({ caseSensitive: true }).use(prefix, ...handlers);
  // Each table's routes are mounted where the API is (`/api`), by their whole paths.
  const at = { prefix: API_PREFIX, audit: deps.audit };
  const listing = mountRoutes(listingRoutes, deps, at);
  // A body is read (and refused when malformed) on every route but the automation route's own.
  const routers: Record<RouteName, RequestHandler | undefined> = {
    // The API's own description needs no credentials and names no realm.
    openapi: (req, res, next) => {
      if (req.method === 'GET' || req.method === 'HEAD') res.json(openApiDocument);
      else next();
    },
    automation: deps.builtInOperations
      ? below('/', mountRoutes(operationsRoutes, deps.operations, at), json)
      : undefined,
    organization_list: below('/', json, listing),
    workspace_list: below('/', json, listing),
    refresh_tokens: below('/', json, mountRoutes(refreshTokensRoutes, deps.refreshTokens, at)),
    platform: below('/platform', json, deps.platformRouter),
    none: json,
    outside: undefined,
  };
  return Router({ caseSensitive: true }).use(
    admitApiRequests(deps.admission, (req) => deps.forwarding.clientAddress(req)),
    (req, res, next) => {
      const router = routers[scopeOf(req).route.name];
      if (router) router(req, res, next);
      else next();
    },
  );
}
