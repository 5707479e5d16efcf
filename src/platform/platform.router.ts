import { Router } from 'express';
import type { Knex } from 'knex';
import type { RevocationList } from '../auth/revocation.ts';
import { longestServedSeconds } from '../auth/basic/cached-login.ts';
import type { Config } from '../config/config.ts';
import type { Audit } from '../http/audit.ts';
import type { AdminSession } from '../keycloak/admin-session.ts';
import { mountRoutes } from '../http/route-table.ts';
import { organizationLifecycleRoutes } from './organization-lifecycle.router.ts';
import { createOrganizationLifecycle } from './organization-lifecycle.service.ts';
import type { OrganizationEvents } from './organization-events.ts';
import { provisioningRoutes } from './provisioning.router.ts';
import { createProvisioningService } from './provisioning.service.ts';
import { createTokenRefusal } from './token-refusal.ts';
import { usersRoutes } from './users.router.ts';
import { createUsersService } from './users.service.ts';

/** Where the platform router is mounted (api/api.router.ts). */
export const PLATFORM_PREFIX = '/api/platform';

/** The routes of the platform router, as declared (for the OpenAPI document). */
export const platformRoutes = [
  ...provisioningRoutes,
  ...usersRoutes,
  ...organizationLifecycleRoutes,
];

/**
 * Everything administrators call under `/api/platform` (the admission in front lets only
 * master-realm users in): provisioning, the user lifecycle, and the organization and workspace
 * lifecycle, all through the bootstrap administrator's one admin session.
 */
export function createPlatformRouter(deps: {
  adminSession: AdminSession;
  db: Knex;
  audit: Audit;
  revocations: RevocationList;
  organizationEvents: Pick<OrganizationEvents, 'announce'>;
  config: Pick<
    Config,
    | 'KEYCLOAK_ADMIN_USERNAME'
    | 'KEYCLOAK_CLIENT_SECRET'
    | 'BASIC_CACHE_MAX_SECONDS'
    | 'BASIC_OUTAGE_MAX_SECONDS'
    | 'TOKEN_CLOCK_LEEWAY_SECONDS'
  >;
}): Router {
  const { adminSession, db, audit, revocations, config } = deps;
  const tokenBounds = {
    // A revocation voids the user's cached Basic logins for as long as one may be served.
    basicCacheSeconds: longestServedSeconds({
      cacheSeconds: config.BASIC_CACHE_MAX_SECONDS,
      outageSeconds: config.BASIC_OUTAGE_MAX_SECONDS,
    }),
    leewaySeconds: config.TOKEN_CLOCK_LEEWAY_SECONDS,
  };
  const provisioning = createProvisioningService({
    adminSession,
    db,
    gatewayClientSecret: config.KEYCLOAK_CLIENT_SECRET ?? '',
  });
  const users = createUsersService({
    adminSession,
    db,
    revocations,
    bootstrapAdmin: config.KEYCLOAK_ADMIN_USERNAME,
    ...tokenBounds,
  });
  const lifecycle = createOrganizationLifecycle({
    adminSession,
    db,
    announce: (change) => deps.organizationEvents.announce(change),
    refuseTokens: createTokenRefusal({ revocations, ...tokenBounds }),
  });
  const at = { prefix: PLATFORM_PREFIX, audit };
  return Router().use(
    mountRoutes(provisioningRoutes, provisioning, at),
    mountRoutes(usersRoutes, users, at),
    mountRoutes(organizationLifecycleRoutes, lifecycle, at),
  );
}
