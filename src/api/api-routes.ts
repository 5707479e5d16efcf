import { operationsRoutes } from '../automation/operations.router.ts';
import { listingRoutes } from '../platform/listing.router.ts';
import { platformRoutes } from '../platform/platform.router.ts';
import { refreshTokensRoutes } from '../platform/refresh-tokens.router.ts';
import type { DeclaredRoute } from './openapi-routes.ts';

/**
 * Every route of `/api` as its table declares it (http/route-table.ts): the routers are mounted
 * from these tables and the OpenAPI document is generated from them.
 */
export const API_ROUTES: readonly DeclaredRoute[] = [
  ...listingRoutes,
  ...platformRoutes,
  ...refreshTokensRoutes,
  ...operationsRoutes,
];
