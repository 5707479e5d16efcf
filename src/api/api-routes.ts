import { auditLogRoutes } from '../audit/audit-log.router.ts';
import { auditDownloadRoutes } from '../audit/download-jobs.router.ts';
import { auditRetentionRoutes } from '../audit/audit-retention.router.ts';
import { FORWARDED_ROUTE } from '../automation/forward-route.ts';
import { operationsRoutes } from '../automation/operations.router.ts';
import type { RouteDeclaration } from '../edge/route.ts';
import type { AnyRoute } from '../http/route-table.ts';
import { listingRoutes } from '../platform/listing.router.ts';
import { organizationLifecycleRoutes } from '../platform/organization-lifecycle.router.ts';
import { provisioningRoutes } from '../platform/provisioning.router.ts';
import { refreshTokensRoutes } from '../platform/refresh-tokens.router.ts';
import { signingKeysRoutes } from '../platform/signing-keys.router.ts';
import { usersRoutes } from '../platform/users.router.ts';
import type { DeclaredRoute } from './openapi-routes.ts';

/**
 * Every table of `/api` (http/route-table.ts), by the name of the service its handlers are
 * served with, registered once: the edge's reader of paths is compiled from them
 * (apiDeclarations), the API dispatches to their handlers with their services (api.router.ts;
 * each service built by its area) and the OpenAPI document is generated from them. A new table
 * is one line here and its service in its area's builder.
 */
export const API_TABLES = {
  listing: listingRoutes,
  provisioning: provisioningRoutes,
  users: usersRoutes,
  organizationLifecycle: organizationLifecycleRoutes,
  signingKeys: signingKeysRoutes,
  refreshTokens: refreshTokensRoutes,
  operations: operationsRoutes,
  auditLog: auditLogRoutes,
  auditDownload: auditDownloadRoutes,
  auditRetention: auditRetentionRoutes,
} as const;

type ServiceOf<Routes> = Routes extends readonly AnyRoute<infer Service>[] ? Service : never;

/** The service of each table: what its handlers take. */
export type ApiServices = {
  [Name in keyof typeof API_TABLES]: ServiceOf<(typeof API_TABLES)[Name]>;
};

/** Every route of `/api` as its table declares it. */
export const API_ROUTES: readonly DeclaredRoute[] = Object.values(API_TABLES).flat();

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
