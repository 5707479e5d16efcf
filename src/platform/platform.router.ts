import type { Knex } from 'knex';
import type { FailedLoginMemory } from '../auth/failed-logins.ts';
import type { RevocationList } from '../auth/revocation.ts';
import { longestServedSeconds } from '../auth/basic/cached-login.ts';
import type { Config } from '../config/config.ts';
import type { AdminSession } from '../keycloak/admin-session.ts';
import { serveTable, type ServedTable } from '../http/route-table.ts';
import { organizationLifecycleRoutes } from './organization-lifecycle.router.ts';
import { createOrganizationLifecycle } from './organization-lifecycle.service.ts';
import type { OrganizationEvents } from './organization-events.ts';
import { provisioningRoutes } from './provisioning.router.ts';
import { signingKeysRoutes } from './signing-keys.router.ts';
import type { SigningKeysService } from './signing-keys.service.ts';
import { createProvisioningService } from './provisioning.service.ts';
import { createTokenRefusal } from './token-refusal.ts';
import { usersRoutes } from './users.router.ts';
import { createUsersService } from './users.service.ts';

/** The routes of the platform's tables, as declared (for the edge and the OpenAPI document). */
export const platformRoutes = [
  ...provisioningRoutes,
  ...usersRoutes,
  ...organizationLifecycleRoutes,
  ...signingKeysRoutes,
];

/**
 * Everything administrators call under `/api/platform` (the admission in front lets only
 * master-realm users in): provisioning, the user lifecycle, and the organization and workspace
 * lifecycle, all through the bootstrap administrator's one admin session.
 */
export function createPlatformTables(deps: {
  adminSession: AdminSession;
  db: Knex;
  revocations: RevocationList;
  organizationEvents: Pick<OrganizationEvents, 'announce'>;
  signingKeys: SigningKeysService;
  failedLogins: Pick<FailedLoginMemory, 'passwordSet'>;
  /** Where new realms' clients announce ended sessions (auth-proxy/backchannel-logout.ts). */
  backchannelLogoutUrl: string;
  config: Pick<
    Config,
    | 'KEYCLOAK_ADMIN_USERNAME'
    | 'KEYCLOAK_CLIENT_SECRET'
    | 'BASIC_CACHE_MAX_SECONDS'
    | 'BASIC_OUTAGE_MAX_SECONDS'
    | 'TOKEN_CLOCK_LEEWAY_SECONDS'
  >;
}): ServedTable[] {
  const { adminSession, db, revocations, config } = deps;
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
    backchannelLogoutUrl: deps.backchannelLogoutUrl,
  });
  const users = createUsersService({
    adminSession,
    db,
    revocations,
    bootstrapAdmin: config.KEYCLOAK_ADMIN_USERNAME,
    failedLogins: deps.failedLogins,
    ...tokenBounds,
  });
  const lifecycle = createOrganizationLifecycle({
    adminSession,
    db,
    announce: (change) => deps.organizationEvents.announce(change),
    refuseTokens: createTokenRefusal({ revocations, ...tokenBounds }),
  });
  return [
    serveTable(provisioningRoutes, provisioning),
    serveTable(usersRoutes, users),
    serveTable(organizationLifecycleRoutes, lifecycle),
    serveTable(signingKeysRoutes, deps.signingKeys),
  ];
}
