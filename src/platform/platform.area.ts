import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { AuthArea } from '../auth/auth.area.ts';
import type { IpcPeer } from '../cache/ipc-peer.ts';
import type { ReplicaBus } from '../cache/replica-bus.ts';
import type { Config } from '../config/config.ts';
import type { AdminSession } from '../keycloak/admin-session.ts';
import type { ServiceAdmin } from '../keycloak/service-admin.ts';
import type { Clock } from '../time/clock.ts';
import { backchannelLogoutUrlOf } from '../auth-proxy/backchannel-logout.ts';
import type { AuthProxyArea } from '../auth-proxy/auth-proxy.area.ts';
import type { ReadinessCheck } from '../http/health.router.ts';
import { createRealmAlignment, type RealmAlignment } from './realm-alignment.ts';
import { createRealmAlignmentsRepo } from './realm-alignments.repo.ts';
import type { ListingRepos } from './listing.router.ts';
import {
  createOrganizationDirectory,
  type OrganizationDirectory,
} from './organization-directory.ts';
import { createOrganizationEvents, type OrganizationEvents } from './organization-events.ts';
import { createWorkerOrganizationMemory } from './organization-memory.ts';
import {
  createOrganizationLifecycle,
  type OrganizationLifecycle,
} from './organization-lifecycle.service.ts';
import { createOrganizationsRepo, type OrganizationsRepo } from './organizations.repo.ts';
import {
  createProvisioningService,
  type OrganizationBeginning,
  type ProvisioningService,
} from './provisioning.service.ts';
import { createRefreshTokensService, type RefreshTokensService } from './refresh-tokens.service.ts';
import { createSigningKeysService, type SigningKeysService } from './signing-keys.service.ts';
import {
  createFormerLifetimeKeeping,
  createRealmTokenRefusal,
  createRoleTokenRefusal,
} from './token-refusal.ts';
import { createUsersService, type UsersService } from './users.service.ts';
import { createWorkspacesRepo, type WorkspacesRepo } from './workspaces.repo.ts';

/** The organizations and workspaces as the admission and the platform's services read them. */
export interface Tenants {
  organizationsRepo: OrganizationsRepo;
  workspaces: WorkspacesRepo;
  /** Organization states from memory, told of changes on every replica at once (with Redis). */
  directory: OrganizationDirectory;
  events: OrganizationEvents;
}

/** Opens the organization directory and the channel that keeps it the same on every replica. */
export async function buildTenants(shared: {
  config: Config;
  logger: Logger;
  clock: Clock;
  db: Knex;
  bus: ReplicaBus | undefined;
  worker: { peer: IpcPeer } | undefined;
}): Promise<Tenants> {
  const organizationsRepo = createOrganizationsRepo(shared.db);
  // A worker serves what its siblings confirmed too (a worker started during a database outage).
  const memory = shared.worker && createWorkerOrganizationMemory(shared.worker.peer);
  const directory = createOrganizationDirectory(organizationsRepo, shared.clock, memory);
  // A disabled or deleted organization is refused on every replica at once (with Redis); then
  // the database says what holds: two changes' messages may arrive in either order.
  const events = await createOrganizationEvents({
    bus: shared.bus,
    keyPrefix: shared.config.REDIS_KEY_PREFIX,
    logger: shared.logger,
    apply: ({ organizationId, state }) => {
      directory.learn(organizationId, state);
      directory.reread(organizationId).catch((err: unknown) => {
        shared.logger.warn(
          { err, organization: organizationId },
          'organization change kept as announced: the database could not be read again',
        );
      });
    },
  });
  return { organizationsRepo, workspaces: createWorkspacesRepo(shared.db), directory, events };
}

/** The services of the platform's route tables (api/api-routes.ts `API_TABLES` names them). */
export interface PlatformServices {
  listing: ListingRepos;
  refreshTokens: RefreshTokensService;
  provisioning: ProvisioningService;
  users: UsersService;
  organizationLifecycle: OrganizationLifecycle;
  signingKeys: SigningKeysService;
}

/** What the platform area gives: its tables' services, and the realms' alignment to start. */
export interface PlatformArea {
  services: PlatformServices;
  /**
   * Points every realm's clients of the gateway at its back-channel logout URL, in the
   * background once the listeners are up (`start`); reported in readiness.
   */
  realmAlignment: RealmAlignment;
}

/**
 * Builds what administrators and users call under `/api/.../platform`: provisioning, the user
 * lifecycle, the organization and workspace lifecycle (all through the bootstrap
 * administrator's one admin session), signing keys, refresh tokens and the list endpoints; and
 * the alignment of existing realms with the back-channel logout URL.
 */
export function buildPlatform(
  shared: {
    config: Config;
    logger: Logger;
    db: Knex;
    readiness: Record<string, ReadinessCheck>;
  },
  keycloak: { adminSession: AdminSession; serviceAdmin: ServiceAdmin },
  auth: Pick<
    AuthArea,
    | 'revocations'
    | 'failedLogins'
    | 'accountLocks'
    | 'keySetEvents'
    | 'jwks'
    | 'tokenDetails'
    | 'basicLoginSeconds'
    | 'dpopSwitches'
  >,
  tenants: Tenants,
  /** The keys password grants' sessions are bound to, and the revocations of ended sessions. */
  authProxy: Pick<AuthProxyArea, 'tokenBindings' | 'refuseEnded'>,
  /** The audit log's part in an organization's creation (provisioning.service.ts). */
  organizationBegins: OrganizationBeginning,
  /** A new organization's realm's settings besides the template's (the audit log's events). */
  newRealmSettings?: Readonly<Record<string, unknown>>,
): PlatformArea {
  const { config, db } = shared;
  // Where realms' clients announce ended sessions: new realms at creation, existing ones here.
  const backchannelLogoutUrl = backchannelLogoutUrlOf(config);
  const realmAlignment = createRealmAlignment({
    adminSession: keycloak.adminSession,
    url: backchannelLogoutUrl,
    logger: shared.logger,
    records: createRealmAlignmentsRepo(db),
  });
  shared.readiness.backchannel_logout = () => realmAlignment.report();
  const { adminSession } = keycloak;
  const { revocations } = auth;
  // A revocation voids the user's cached Basic logins for as long as one may be served.
  const tokenBounds = {
    basicCacheSeconds: auth.basicLoginSeconds,
    leewaySeconds: config.TOKEN_CLOCK_LEEWAY_SECONDS,
  };
  const services: PlatformServices = {
    listing: { organizations: tenants.organizationsRepo, workspaces: tenants.workspaces },
    refreshTokens: createRefreshTokensService({
      admin: keycloak.serviceAdmin,
      revocations,
      details: auth.tokenDetails,
      bindings: authProxy.tokenBindings,
      refuseEnded: authProxy.refuseEnded,
      ...tokenBounds,
    }),
    provisioning: createProvisioningService({
      adminSession,
      db,
      gatewayClientSecret: config.KEYCLOAK_CLIENT_SECRET ?? '',
      backchannelLogoutUrl,
      recordAligned: (realm) => realmAlignment.recordAligned(realm),
      organizationBegins,
      newRealmSettings,
      announce: (change) => tenants.events.announce(change),
      keepFormerLifetime: createFormerLifetimeKeeping({ revocations, ...tokenBounds }),
      dpopSwitchSet: (realm, required) => auth.dpopSwitches.set(realm, required),
    }),
    users: createUsersService({
      adminSession,
      db,
      revocations,
      bootstrapAdmin: config.KEYCLOAK_ADMIN_USERNAME,
      failedLogins: auth.failedLogins,
      accountLocks: auth.accountLocks,
      ...tokenBounds,
    }),
    organizationLifecycle: createOrganizationLifecycle({
      adminSession,
      db,
      announce: (change) => tenants.events.announce(change),
      refuseRoleTokens: createRoleTokenRefusal({ revocations, ...tokenBounds }),
      refuseRealmTokens: createRealmTokenRefusal({ revocations, ...tokenBounds }),
    }),
    signingKeys: createSigningKeysService({
      events: auth.keySetEvents,
      jwks: auth.jwks,
      organizations: tenants.organizationsRepo,
    }),
  };
  return { services, realmAlignment };
}
