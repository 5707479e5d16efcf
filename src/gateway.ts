import { randomBytes } from 'node:crypto';
import type { RequestListener, Server } from 'node:http';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { apiDeclarations } from './api/api-routes.ts';
import { createApiRouter } from './api/api.router.ts';
import { createApp, type Listener } from './app.ts';
import { createAdmission } from './auth/admission.ts';
import { createFailedLoginMemory } from './auth/failed-logins.ts';
import { createLoginThrottle } from './auth/login-throttle.ts';
import { createForwardRoute } from './automation/forward-route.ts';
import { createForwarder } from './automation/forwarder.ts';
import { createBasicAuthenticator } from './auth/basic/basic-authenticator.ts';
import { longestServedSeconds } from './auth/basic/cached-login.ts';
import { createBearerVerifier } from './auth/bearer/bearer-verifier.ts';
import { createDpopScheme } from './auth/dpop/dpop-scheme.ts';
import { createProofChecker } from './auth/dpop/dpop-proof.ts';
import { createProofReplayStore } from './auth/dpop/dpop-replay.ts';
import { htuBaseOf } from './auth/dpop/dpop-htu.ts';
import { createActiveCheck } from './auth/bearer/active-check.ts';
import { createJwksRegistry } from './auth/bearer/jwks.ts';
import { createIdTokenReader } from './auth/bearer/id-token.ts';
import { createKeySetEvents } from './auth/bearer/key-set-events.ts';
import { createWorkerKeySetMemory } from './auth/bearer/key-set-memory.ts';
import { createRevocationList } from './auth/revocation.ts';
import { createReachStep } from './auth/reach.ts';
import { createTokenDetailsStore } from './auth/token-details.ts';
import { createTokenBindingStore } from './auth-proxy/token-bindings.ts';
import { createOperationsRepo } from './automation/operations.repo.ts';
import { createCache, type Cache } from './cache/index.ts';
import { createReplicaBus } from './cache/replica-bus.ts';
import { createIpcBus } from './cache/ipc-bus.ts';
import { combineBuses } from './cache/worker-bus.ts';
import { createIpcCache } from './cache/ipc-cache.ts';
import type { IpcPeer } from './cache/ipc-peer.ts';
import type { FallbackCache } from './cache/fallback-cache.ts';
import type { Config } from './config/config.ts';
import { createCanonicalHost } from './edge/canonical-host.ts';
import { createEdge } from './edge/edge.ts';
import { compileRoutes } from './edge/route.ts';
import { createForwarding } from './edge/forwarding.ts';
import { createAudit } from './http/audit.ts';
import { checkDatabase, openDatabase, poolState } from './db/database.ts';
import { migrateToLatest } from './db/migrate.ts';
import { isBootstrapAdmin } from './auth-proxy/bootstrap-admin-guard.ts';
import { AUTH_ROUTES } from './auth-proxy/auth-routes.ts';
import { canonicalConsolePath } from './auth-proxy/console-page.ts';
import { checkKeycloakNodes } from './keycloak/keycloak-health.ts';
import { createKeycloakNodes, displayUrlOf } from './keycloak/keycloak-nodes.ts';
import { createServiceAdmin } from './keycloak/service-admin.ts';
import { hasTwoFactor, longestAccessTokenSeconds } from './platform/realm-admin/users.ts';
import { createTokenClient } from './keycloak/token-client.ts';
import { createAdminSession } from './keycloak/admin-session.ts';
import { createKeycloakCalls } from './keycloak/keycloak-calls.ts';
import { createRefreshTokensService } from './platform/refresh-tokens.service.ts';
import { createOrganizationDirectory } from './platform/organization-directory.ts';
import { createOrganizationEvents } from './platform/organization-events.ts';
import { createOrganizationsRepo } from './platform/organizations.repo.ts';
import { createPlatformTables } from './platform/platform.router.ts';
import { createSigningKeysService } from './platform/signing-keys.service.ts';
import { createWorkspacesRepo } from './platform/workspaces.repo.ts';
import { closeServer, listen } from './server.ts';
import { createMetrics, metricsOff } from './metrics/metrics.ts';
import { createTracing, tracesUrlOf } from './tracing/tracing.ts';
import { systemClock, type Clock } from './time/clock.ts';

export interface Gateway {
  readonly publicServer: Server;
  readonly adminServer: Server;
  readonly db: Knex;
  readonly cache: Cache;
  /**
   * Shuts down gracefully: `/readyz` answers 503 at once, the listeners stop accepting,
   * requests in flight finish within SHUTDOWN_GRACE_SECONDS, then Redis and the database close.
   */
  close(): Promise<void>;
}

/** How this gateway process sits among the workers of one gateway (WORKERS > 1). */
export interface WorkerRole {
  /** Its number, 1 to WORKERS: in the access log, the admin listener's answers and a metric. */
  id: string;
  /**
   * Its channel to the supervising process, which ran the migration, aggregates `/metrics`
   * and, without Redis, holds the shared cache and relays the replica bus.
   */
  peer: IpcPeer;
}

/**
 * Opens storage (migrating it, unless a supervising process did), builds both listeners and
 * starts them. `keycloakUrl` is the Keycloak the gateway talks to, local or external: one URL,
 * or the nodes of one cluster. `worker` is set in a worker process (WORKERS > 1). `clock` is
 * the time every rule with a lifetime reads (the system's; tests pass one they advance).
 */
export async function startGateway(
  config: Config,
  keycloakUrl: string | readonly string[],
  logger: Logger,
  worker?: WorkerRole,
  clock: Clock = systemClock,
): Promise<Gateway> {
  const db = await openDatabase({
    databaseUrl: config.DATABASE_URL,
    dataDir: config.DATA_DIR,
    logger,
  });
  if (!worker) await migrateToLatest(db, logger);
  // The workers of one gateway share one cache (the login throttle, the single-flight of cold
  // Basic logins): Redis', and without Redis or while it fails the supervising process's.
  const cache = createCache({
    redisUrl: config.REDIS_URL,
    keyPrefix: config.REDIS_KEY_PREFIX,
    maxEntries: config.MEMORY_CACHE_MAX_ENTRIES,
    commandTimeoutMs: 1000,
    logger,
    local: worker && createIpcCache(worker.peer),
    clock,
  });
  const cacheSecret = config.REALMGATE_CACHE_SECRET ?? randomBytes(32).toString('base64url');
  if (!config.REALMGATE_CACHE_SECRET && config.REDIS_URL) {
    logger.warn(
      'REALMGATE_CACHE_SECRET is unset: Basic logins cached in Redis are not shared between replicas',
    );
  }
  // Keycloak's nodes and their states, shared by the gateway's own calls, the /auth proxy,
  // /readyz and the metrics.
  const keycloakNodes = createKeycloakNodes({
    urls: typeof keycloakUrl === 'string' ? [keycloakUrl] : keycloakUrl,
    timeoutMs: config.KEYCLOAK_TIMEOUT_MS,
    clock,
    onChange: (node, reason) => {
      const fields = { keycloakNode: node.index, url: displayUrlOf(node.url), reason };
      if (node.state === 'down') logger.warn(fields, 'Keycloak node down');
      else logger.info(fields, 'Keycloak node up');
    },
  });
  const readiness = {
    keycloak: () => checkKeycloakNodes(keycloakNodes),
    database: () => checkDatabase(db),
    cache: async () => {
      await cache.ping();
      // With Redis down the in-process cache serves: degraded, still ready.
      return (cache as Partial<FallbackCache>).degraded ? ('degraded' as const) : undefined;
    },
  };
  const metrics = config.METRICS_ENABLED
    ? createMetrics({
        readiness,
        databasePool: () => poolState(db),
        keycloakNodes,
        worker: worker?.id,
      })
    : metricsOff;
  // Off unless an OTLP endpoint is configured: then nothing below creates a span.
  const tracesUrl = tracesUrlOf(config);
  const tracing = tracesUrl
    ? await createTracing({
        url: tracesUrl,
        headers: config.OTEL_EXPORTER_OTLP_HEADERS ?? {},
        serviceName: config.OTEL_SERVICE_NAME,
        sampleRatio: config.OTEL_TRACES_SAMPLER_ARG,
        logger,
      })
    : undefined;
  // A worker's /metrics shows the whole gateway: the supervising process gathers every worker's.
  const registry = metrics.registry;
  if (worker && registry) worker.peer.serve('metrics', () => registry.getMetricsAsJSON());
  const exposition =
    worker && registry
      ? {
          contentType: registry.contentType,
          metrics: () => worker.peer.call<string>('metrics.cluster'),
        }
      : undefined;
  const forwarding = createForwarding(config.TRUSTED_PROXIES);
  const audit = createAudit(logger, (req) => forwarding.clientAddress(req));
  // The one client layer for the gateway's own Keycloak calls (grants, introspection, JWKS,
  // admin API), with the one translation of their failures.
  const calls = createKeycloakCalls({
    nodes: keycloakNodes,
    timeoutMs: config.KEYCLOAK_TIMEOUT_MS,
    observer: config.METRICS_ENABLED
      ? { onCall: (kind, outcome, seconds) => metrics.keycloakCall(kind, outcome, seconds) }
      : undefined,
    tracing,
  });
  // A worker's key sets include what its siblings fetched: each verifies through an outage.
  const jwks = createJwksRegistry({
    calls,
    refreshSeconds: config.KEY_SET_REFRESH_SECONDS,
    memory: worker ? createWorkerKeySetMemory(worker.peer) : undefined,
    logger,
    clock,
  });
  const bearer = createBearerVerifier({
    jwks,
    publicUrl: config.PUBLIC_URL,
    leewaySeconds: config.TOKEN_CLOCK_LEEWAY_SECONDS,
    maxCachedTokens: config.MEMORY_CACHE_MAX_ENTRIES,
    metrics,
    clock,
  });
  const clientSecret = config.KEYCLOAK_CLIENT_SECRET ?? '';
  const serviceAdmin = createServiceAdmin({ calls, clientSecret });
  const tokens = createTokenClient({
    calls,
    gatewayClientSecret: clientSecret,
    publicUrl: config.PUBLIC_URL,
  });
  // What replicas tell each other (revocations, organization changes), over one pair of Redis
  // connections; without Redis, what the workers of one gateway tell each other, over IPC.
  // With both, a worker tells its siblings through the supervising process too: at once, even
  // while Redis is down.
  const redisBus = config.REDIS_URL
    ? await createReplicaBus({ redisUrl: config.REDIS_URL, logger })
    : undefined;
  const workerBus = worker && createIpcBus(worker.peer);
  const bus =
    redisBus && workerBus ? combineBuses(redisBus, workerBus, clock) : (redisBus ?? workerBus);
  const revocations = await createRevocationList({
    bus,
    keyPrefix: config.REDIS_KEY_PREFIX,
    metrics,
    logger,
    clock,
  });
  // The one throttle of password attempts: Basic logins here, password grants and the login
  // form on /auth (app.ts).
  const loginThrottle = createLoginThrottle({
    cache,
    secret: cacheSecret,
    maxFailuresPerUserAndAddress: config.LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS,
    maxFailuresPerAddress: config.LOGIN_MAX_FAILURES_PER_ADDRESS,
    windowSeconds: config.LOGIN_FAILURE_WINDOW_SECONDS,
    waitMs: config.LOGIN_WAIT_SECONDS * 1000,
    // The longest a Basic login (see loginLockMs below) or a proxied grant can take.
    attemptMaxMs: Math.max(3 * config.KEYCLOAK_TIMEOUT_MS, config.AUTH_PROXY_TIMEOUT_MS),
    clock,
    onLimitReached: ({ scope, realm, username, address }) =>
      audit.record({
        action: 'login_throttle.start',
        outcome: 'success',
        target:
          scope === 'account_address' ? { scope, realm, username, address } : { scope, address },
        clientAddress: address,
      }),
  });
  // One memory of wrong passwords for Basic and the token endpoint, as long as the window.
  const failedLogins = createFailedLoginMemory({
    cache,
    secret: cacheSecret,
    windowSeconds: config.LOGIN_FAILURE_WINDOW_SECONDS,
    clock,
  });
  // The longest a cached Basic login may be served: a user's revocation is remembered as long.
  const basicLoginSeconds = longestServedSeconds({
    cacheSeconds: config.BASIC_CACHE_MAX_SECONDS,
    outageSeconds: config.BASIC_OUTAGE_MAX_SECONDS,
  });
  const basic = createBasicAuthenticator({
    tokens,
    bearer,
    cache,
    cacheSecret,
    maxCacheSeconds: config.BASIC_CACHE_MAX_SECONDS,
    maxOutageSeconds: config.BASIC_OUTAGE_MAX_SECONDS,
    keycloakDown: () => keycloakNodes.all.every((node) => node.state === 'down'),
    maxLocalEntries: config.MEMORY_CACHE_MAX_ENTRIES,
    failedLogins,
    // A login may take a grant, a key-set fetch and a two-factor lookup, each bounded so.
    loginLockMs: 3 * config.KEYCLOAK_TIMEOUT_MS,
    refuses: (realm, username) => isBootstrapAdmin(config.KEYCLOAK_ADMIN_USERNAME, realm, username),
    throttle: loginThrottle,
    revocations,
    hasTwoFactor: (realm, username) => hasTwoFactor(serviceAdmin, realm, username),
    metrics,
    logger,
    clock,
  });
  const activeCheck = createActiveCheck({
    tokens,
    revocations,
    intervalSeconds: config.REVOCATION_CHECK_SECONDS,
    waitMs: config.REVOCATION_CHECK_WAIT_MS,
    basicCacheSeconds: basicLoginSeconds,
    metrics,
    logger,
    clock,
  });
  const tokenDetails = createTokenDetailsStore(db);
  const tokenBindings = createTokenBindingStore(db);
  const refreshTokens = createRefreshTokensService({
    admin: serviceAdmin,
    revocations,
    details: tokenDetails,
    bindings: tokenBindings,
    basicCacheSeconds: basicLoginSeconds,
    leewaySeconds: config.TOKEN_CLOCK_LEEWAY_SECONDS,
  });
  let shuttingDown = false;
  const organizations = createOrganizationsRepo(db);
  const workspaces = createWorkspacesRepo(db);
  const adminSession = createAdminSession({
    calls,
    username: config.KEYCLOAK_ADMIN_USERNAME,
    password: config.KEYCLOAK_ADMIN_PASSWORD ?? '',
    clock,
  });
  const directory = createOrganizationDirectory(organizations, clock);
  // A disabled or deleted organization is refused on every replica at once (with Redis).
  const organizationEvents = await createOrganizationEvents({
    bus,
    keyPrefix: config.REDIS_KEY_PREFIX,
    logger,
    apply: ({ organizationId, state }) => directory.learn(organizationId, state),
  });
  // A forced key-set refresh (an operator, or a key-provider change through an admin listener)
  // reaches every replica and worker.
  const keySetEvents = await createKeySetEvents({
    bus,
    keyPrefix: config.REDIS_KEY_PREFIX,
    jwks,
    logger,
  });
  const reach = createReachStep({
    store: tokenDetails,
    cache,
    clientAddressOf: (req) => forwarding.clientAddress(req),
    maxEntries: config.MEMORY_CACHE_MAX_ENTRIES,
    clock,
    onUseFailed: (err) => logger.warn({ err }, 'could not write the last use of a refresh token'),
  });
  const admission = createAdmission({
    basic,
    bearer,
    dpop: createDpopScheme({
      check: createProofChecker({
        algorithms: config.DPOP_ALGORITHMS,
        maxAgeSeconds: config.DPOP_PROOF_MAX_AGE_SECONDS,
        aheadSeconds: config.DPOP_PROOF_AHEAD_SECONDS,
        maxCachedKeys: config.MEMORY_CACHE_MAX_ENTRIES,
        clock,
      }),
      replay: createProofReplayStore({ cache, clock }),
      htuBase: htuBaseOf(config.PUBLIC_URL),
      algorithms: config.DPOP_ALGORITHMS,
    }),
    revocations,
    activeCheck,
    organizations: directory,
    workspaces,
    clientAddressOf: (req) => forwarding.clientAddress(req),
    reach,
    metrics,
    tracing,
  });
  const api = createApiRouter({
    admission,
    audit,
    refreshTokens,
    organizations,
    workspaces,
    operations: createOperationsRepo(db),
    platformTables: createPlatformTables({
      adminSession,
      db,
      revocations,
      organizationEvents,
      signingKeys: createSigningKeysService({ events: keySetEvents, jwks, organizations }),
      failedLogins,
      config,
    }),
    builtInOperations: config.AUTOMATION_UPSTREAM_URL === undefined,
  });
  const deps = {
    logger,
    keycloakNodes,
    publicUrl: config.PUBLIC_URL,
    adminUrl: config.ADMIN_PUBLIC_URL,
    authProxyTimeoutMs: config.AUTH_PROXY_TIMEOUT_MS,
    forwarding,
    bootstrapAdmin: config.KEYCLOAK_ADMIN_USERNAME,
    api,
    isShuttingDown: () => shuttingDown,
    readiness,
    metrics,
    exposition,
    loginThrottle,
    failedLogins,
    // What passes through the /auth mount (logouts, revocations, the admin API's account and
    // key changes) ends at the gateway when Keycloak says yes.
    endAccess: {
      revocations,
      bearer,
      idTokenSession: createIdTokenReader({ jwks, publicUrl: config.PUBLIC_URL }),
      accessTokenSeconds: (realm: string) =>
        serviceAdmin.run(realm, (admin) => longestAccessTokenSeconds(admin, realm)),
      leewaySeconds: config.TOKEN_CLOCK_LEEWAY_SECONDS,
      basicCacheSeconds: basicLoginSeconds,
      onKeyProvidersChanged: (realm: string) => keySetEvents.refreshEverywhere(realm),
      // The throttle's memory is keyed by user name; the admin API names the user by id.
      onPasswordSet: (realm: string, userId: string) =>
        serviceAdmin.run(realm, async (admin) => {
          const user = await admin.users.findOne({ realm, id: userId });
          if (user?.username) await failedLogins.passwordSet(realm, user.username);
        }),
      logger,
      clock,
    },
    jobCredentials: {
      store: tokenDetails,
      bindings: tokenBindings,
      reach,
      bearer,
      endSession: (realm: string, sessionId: string) =>
        serviceAdmin.run(realm, async (admin) => {
          await admin.realms.deleteSession({ realm, session: sessionId, isOffline: true });
        }),
      logger,
      clock,
    },
  };
  const forwardRoute = config.AUTOMATION_UPSTREAM_URL
    ? createForwardRoute({
        admission,
        forward: createForwarder({
          upstreamUrl: config.AUTOMATION_UPSTREAM_URL,
          timeoutMs: config.AUTH_PROXY_TIMEOUT_MS,
          forwarding,
          logger,
          tracing,
        }),
        logger,
      })
    : undefined;
  // The one reader of paths, compiled once from the route tables (the forwarded route's
  // included): `/api`'s and `/auth`'s.
  const routes = compileRoutes([...apiDeclarations(forwardRoute !== undefined), ...AUTH_ROUTES]);
  const consoleHost = createCanonicalHost({
    origin: config.ADMIN_PUBLIC_URL,
    forwarding,
    canonicalPathOf: canonicalConsolePath,
  });
  const handlerOf = (listener: Listener): RequestListener =>
    createEdge({
      logger: logger.child(worker ? { listener, worker: worker.id } : { listener }),
      app: createApp(deps, listener),
      routes,
      forwarded: forwardRoute,
      canonicalHost: listener === 'admin' ? consoleHost : undefined,
      metrics,
      tracing,
    });
  const publicServer = await listen(handlerOf('public'), config.HOST, config.PORT, logger);
  const adminHandler = handlerOf('admin');
  // Operators (and tests) see which worker answered: /readyz, /metrics' scraper.
  const namedAdminHandler: RequestListener = worker
    ? (req, res) => {
        res.setHeader('x-realmgate-worker', worker.id);
        adminHandler(req, res);
      }
    : adminHandler;
  const adminServer = await listen(namedAdminHandler, config.ADMIN_HOST, config.ADMIN_PORT, logger);
  return {
    publicServer,
    adminServer,
    db,
    cache,
    async close() {
      shuttingDown = true;
      keycloakNodes.close();
      jwks.close();
      const graceMs = config.SHUTDOWN_GRACE_SECONDS * 1000;
      await Promise.all([closeServer(publicServer, graceMs), closeServer(adminServer, graceMs)]);
      await cache.close();
      await bus?.close();
      await db.destroy();
      // Last: the spans of the requests that drained are exported too.
      await tracing?.shutdown();
    },
  };
}
