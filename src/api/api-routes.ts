import { FORWARDED_ROUTE } from '../automation/forward-route.ts';
import { operationsRoutes } from '../automation/operations.router.ts';
import type { RouteDeclaration } from '../edge/route.ts';
import { listingRoutes } from '../platform/listing.router.ts';
import { platformRoutes } from '../platform/platform.router.ts';
import { refreshTokensRoutes } from '../platform/refresh-tokens.router.ts';
import type { DeclaredRoute } from './openapi-routes.ts';

/**
 * Every route of `/api` as its table declares it (http/route-table.ts): the edge's reader of
 * paths is compiled from these tables (apiDeclarations), the API dispatches to their handlers
 * and the OpenAPI document is generated from them.
 */
export const API_ROUTES: readonly DeclaredRoute[] = [
  ...listingRoutes,
  ...platformRoutes,
  ...refreshTokensRoutes,
  ...operationsRoutes,
];

/** The API's own description: the one `/api` path read without credentials. */
export const OPENAPI_ROUTE: RouteDeclaration = {
  method: 'get',
  path: '/api/openapi.json',
  metricsClass: 'other',
  open: true,
};

/**
 * What the edge compiles its reader of paths from (edge/route.ts): every entry, and the
 * forwarded automation route when `forwarded` (then it serves its whole subtree, the built-in
 * operation list's path included).
 */
export function apiDeclarations(forwarded: boolean): RouteDeclaration[] {
  return [...API_ROUTES, OPENAPI_ROUTE, ...(forwarded ? [FORWARDED_ROUTE] : [])];
}
