import type { RequestListener, Server } from 'node:http';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { apiDeclarations } from './api/api-routes.ts';
import { createApiRouter } from './api/api.router.ts';
import { createApp } from './app.ts';
import { buildAuditLog } from './audit/audit.area.ts';
import { buildAuth } from './auth/auth.area.ts';
import { buildAuthProxy } from './auth-proxy/auth-proxy.area.ts';
import { AUTH_ROUTES } from './auth-proxy/auth-routes.ts';
import type { Listener } from './auth-proxy/auth-steps.ts';
import { canonicalConsolePath } from './auth-proxy/console-page.ts';
import { buildAutomation } from './automation/automation.area.ts';
import type { Cache } from './cache/index.ts';
import type { Config } from './config/config.ts';
import { createCanonicalHost } from './edge/canonical-host.ts';
import { createEdge } from './edge/edge.ts';
import { compileRoutes } from './edge/route.ts';
import { openInfrastructure, type WorkerRole } from './infrastructure.ts';
import { buildKeycloak } from './keycloak/keycloak.area.ts';
import { buildPlatform, buildTenants } from './platform/platform.area.ts';
import { createAccountAdmin } from './platform/realm-admin/account-admin.ts';
import { closeServer, listen } from './server.ts';
import { systemClock, type Clock } from './time/clock.ts';

export type { WorkerRole };

export interface Gateway {
  readonly publicServer: Server;
  readonly adminServer: Server;
  readonly db: Knex;
  readonly cache: Cache;
  /**
   * Resolves once the schema is current: at once, unless PostgreSQL was unreachable at start
   * (the gateway then serves without it and migrates once it answers). Rejects when that
   * migration fails otherwise (a schema this release cannot run on): the start failed.
   */
  readonly schemaReady: Promise<void>;
  /**
   * Shuts down gracefully: `/readyz` answers 503 at once, the listeners stop accepting,
   * requests in flight finish within SHUTDOWN_GRACE_SECONDS, the audit spool is written, then
   * Redis and the database close.
   */
  close(): Promise<void>;
}

/** How long the audit spool may take to be written after a drain that used the whole grace. */
const AUDIT_FLUSH_MIN_MS = 3000;

/**
 * Builds the gateway area by area from the shared infrastructure, and starts both listeners.
 * `keycloakUrl` is the Keycloak the gateway talks to, local or external: one URL, or the nodes
 * of one cluster. `worker` is set in a worker process (WORKERS > 1). `clock` is the time every
 * rule with a lifetime reads (the system's; tests pass one they advance).
 */
export async function startGateway(
  config: Config,
  keycloakUrl: string | readonly string[],
  logger: Logger,
  worker?: WorkerRole,
  clock: Clock = systemClock,
): Promise<Gateway> {
  const shared = await openInfrastructure(config, keycloakUrl, logger, worker, clock);
  const keycloak = buildKeycloak(shared);
  const accounts = createAccountAdmin(keycloak.serviceAdmin);
  const tenants = await buildTenants(shared);
  tenants.events.onApplied(({ organizationId, state }) => {
    if (state === 'absent') keycloak.serviceAdmin.forgetRealm(organizationId);
  });
  const auth = await buildAuth(shared, keycloak, tenants, accounts);
  // Credential changes made in Keycloak itself end cached Basic logins as they are pulled; a
  // token refused on `/auth` names its session's job credential once its realm's keys verify it.
  const auditLog = await buildAuditLog(shared, tenants, keycloak, auth);
  const automation = buildAutomation(shared, auth.admission);
  const authProxy = buildAuthProxy(shared, auth, accounts, {
    grants: auditLog.tokenGrants,
    reachRefusals: auditLog.authRefusals,
  });
  const platform = buildPlatform(
    shared,
    keycloak,
    auth,
    tenants,
    authProxy,
    auditLog.organizationBegins,
    auditLog.realmEvents,
  );
  const api = createApiRouter({
    admission: auth.admission,
    audit: shared.audit,
    services: {
      ...platform.services,
      operations: automation.operations,
      auditLog: auditLog.service,
      auditDownload: auditLog.downloads,
      auditRetention: auditLog.service,
    },
  });
  let shuttingDown = false;
  const app = (listener: Listener) =>
    createApp(
      {
        logger,
        authMount: authProxy.mount,
        backchannelLogout: authProxy.backchannelLogout,
        resourceMetadata: auth.resourceMetadata,
        auditKeys: auditLog.keys,
        api,
        readiness: shared.readiness,
        build: shared.build,
        isShuttingDown: () => shuttingDown,
        metrics: shared.metrics,
        exposition: shared.exposition,
      },
      listener,
    );
  // The one reader of paths, compiled once from the route tables: `/api`'s and `/auth`'s.
  const routes = compileRoutes([
    ...apiDeclarations(automation.forwarded !== undefined),
    ...AUTH_ROUTES,
  ]);
  const consoleHost = createCanonicalHost({
    origin: config.ADMIN_PUBLIC_URL,
    forwarding: shared.forwarding,
    canonicalPathOf: canonicalConsolePath,
  });
  const handlerOf = (listener: Listener): RequestListener =>
    createEdge({
      logger: logger.child(worker ? { listener, worker: worker.id } : { listener }),
      app: app(listener),
      routes,
      forwarded: automation.forwarded,
      canonicalHost: listener === 'admin' ? consoleHost : undefined,
      metrics: shared.metrics,
      tracing: shared.tracing,
      apiOutcomes: auditLog.apiOutcomes,
    });
  const publicServer = await listen(handlerOf('public'), config.HOST, config.PORT, logger);
  const adminServer = await listen(
    namedByWorker(handlerOf('admin'), worker),
    config.ADMIN_HOST,
    config.ADMIN_PORT,
    logger,
  );
  platform.realmAlignment.start();
  return {
    publicServer,
    adminServer,
    db: shared.db,
    cache: shared.cache,
    schemaReady: shared.schema.ready,
    async close() {
      shuttingDown = true;
      platform.realmAlignment.close();
      auth.close();
      const graceMs = config.SHUTDOWN_GRACE_SECONDS * 1000;
      const drained = Date.now() + graceMs;
      await Promise.all([closeServer(publicServer, graceMs), closeServer(adminServer, graceMs)]);
      // The audit spool, within the grace period: what the drain left of it, or at least the
      // few seconds an orchestrator waits beyond it (docs/operations.md, "Shutdown").
      await auditLog.close(Math.max(drained - Date.now(), AUDIT_FLUSH_MIN_MS));
      await shared.close();
    },
  };
}

/** Operators (and tests) see which worker answered on the admin listener: /readyz, /metrics' scraper. */
function namedByWorker(handler: RequestListener, worker: WorkerRole | undefined): RequestListener {
  if (!worker) return handler;
  return (req, res) => {
    res.setHeader('x-realmgate-worker', worker.id);
    handler(req, res);
  };
}
