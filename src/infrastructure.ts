import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { createCache, type Cache } from './cache/index.ts';
import type { FallbackCache } from './cache/fallback-cache.ts';
import { createIpcBus } from './cache/ipc-bus.ts';
import { createIpcCache } from './cache/ipc-cache.ts';
import type { IpcPeer } from './cache/ipc-peer.ts';
import { createReplicaBus, type ReplicaBus } from './cache/replica-bus.ts';
import { combineBuses } from './cache/worker-bus.ts';
import type { Config } from './config/config.ts';
import { checkDatabase, databaseTimeoutsOf, openDatabase, poolState } from './db/database.ts';
import { migrateAtStart, type SchemaState } from './db/migrate-at-start.ts';
import { gateUntilSchemaCurrent } from './db/schema-gate.ts';
import { schemaOfSupervisor } from './db/supervisor-schema.ts';
import { createForwarding, type Forwarding } from './edge/forwarding.ts';
import { createAudit, type Audit } from './http/audit.ts';
import { sharedCheck, type ReadinessCheck, type ReadinessReport } from './http/health.router.ts';
import { checkKeycloakNodes, sharedNodeProbes } from './keycloak/keycloak-health.ts';
import {
  createKeycloakNodes,
  displayUrlOf,
  type KeycloakNodes,
} from './keycloak/keycloak-nodes.ts';
import type { Exposition } from './metrics/metrics.router.ts';
import { createMetrics, metricsOff, type Metrics } from './metrics/metrics.ts';
import { buildInfo, type BuildInfo } from './release/build-info.ts';
import type { Clock } from './time/clock.ts';
import { createTracing, tracesUrlOf, type Tracing } from './tracing/tracing.ts';

/** How this gateway process sits among the workers of one gateway (WORKERS > 1). */
export interface WorkerRole {
  /** Its number, 1 to WORKERS: in the access log, the admin listener's answers and a metric. */
  id: string;
  /**
   * Its channel to the supervising process, which migrates (and says when), aggregates `/metrics`
   * and, without Redis, holds the shared cache and relays the replica bus.
   */
  peer: IpcPeer;
}

/**
 * What every area is built from: the configuration, time, storage, the replicas' channel,
 * Keycloak's nodes, the client address rule and the operations side (readiness, metrics,
 * audit, tracing). Each area takes what it needs of it.
 */
export interface Infrastructure {
  readonly config: Config;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly worker: WorkerRole | undefined;
  readonly db: Knex;
  /**
   * Whether the schema is current: at once, unless PostgreSQL was unreachable at start (then
   * once the migration in the background ran; migrate-at-start.ts).
   */
  readonly schema: SchemaState;
  /** Shared by the workers of one gateway, and by the replicas through Redis. */
  readonly cache: Cache;
  /** Keys the cache's entries of logins and throttles (HMAC); random when not configured. */
  readonly cacheSecret: string;
  /** What replicas (and workers) tell each other; undefined for a lone process without Redis. */
  readonly bus: ReplicaBus | undefined;
  /** Keycloak's nodes and their states, shared by every Keycloak call, the proxy and readiness. */
  readonly keycloakNodes: KeycloakNodes;
  readonly readiness: Record<string, ReadinessCheck>;
  /** The version and revision: in `realmgate_build_info` and the admin listener's `/healthz`. */
  readonly build: BuildInfo;
  readonly metrics: Metrics;
  /** What `/metrics` shows when not this process's registry alone: every worker's. */
  readonly exposition: Exposition | undefined;
  /** Off unless an OTLP endpoint is configured: then nothing creates a span. */
  readonly tracing: Tracing | undefined;
  readonly forwarding: Forwarding;
  readonly audit: Audit;
  /** Closes what it opened, storage last but the traces. */
  close(): Promise<void>;
}

/**
 * Opens storage (migrating it, unless a supervising process did: in the background when
 * PostgreSQL is unreachable at start, see migrate-at-start.ts), the cache and the replica
 * bus, and builds the operations side. `keycloakUrl`: one URL, or the nodes of one cluster.
 */
export async function openInfrastructure(
  config: Config,
  keycloakUrl: string | readonly string[],
  logger: Logger,
  worker: WorkerRole | undefined,
  clock: Clock,
): Promise<Infrastructure> {
  const db = await openDatabase({
    databaseUrl: config.DATABASE_URL,
    dataDir: config.DATA_DIR,
    timeouts: databaseTimeoutsOf(config),
    logger,
  });
  // Unreachable, the start goes on without it and migrates once it answers; a worker's
  // supervising process migrates for it.
  const schema = worker ? await schemaOfSupervisor(worker.peer) : await migrateAtStart(db, logger);
  // Until then, no query runs on a schema that may lack what it reads (503 `503-00003`).
  const gate = schema.current() ? undefined : gateUntilSchemaCurrent(db, () => schema.current());
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
  if (!config.REALMGATE_CACHE_SECRET && config.REDIS_URL) {
    logger.warn(
      'REALMGATE_CACHE_SECRET is unset: Basic logins cached in Redis are not shared between replicas',
    );
  }
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
  // One database query, one Redis ping and one probe of each Keycloak node at a time, reused
  // for a second, however many ask (the public /readyz, every worker's scrape): see sharedCheck.
  const databaseCheck = sharedCheck(async () => {
    await (gate ? gate.probe() : checkDatabase(db));
    // Answering, but not migrated yet by this process (it started while it was unreachable):
    // the migration need not wait out its backoff. Told once per check run, not per /readyz
    // (from a worker, an IPC message each).
    if (!schema.current()) schema.databaseAnswered();
  });
  const cachePing = sharedCheck(() => cache.ping());
  const keycloakProbes = sharedNodeProbes(keycloakNodes);
  const readiness: Record<string, ReadinessCheck> = {
    keycloak: () =>
      checkKeycloakNodes(
        keycloakNodes,
        worker && (() => worker.peer.call<boolean>('keys.held').catch(() => false)),
        keycloakProbes,
      ),
    database: async (): Promise<ReadinessReport | undefined> => {
      await databaseCheck();
      if (!schema.current()) return { status: 'down', details: { schema: 'not migrated yet' } };
    },
    cache: async () => {
      await cachePing();
      // With Redis down the in-process cache serves: degraded, still ready. Read at each
      // call, not shared: a switch shows at once.
      return (cache as Partial<FallbackCache>).degraded ? 'degraded' : undefined;
    },
  };
  const build = buildInfo();
  const metrics = config.METRICS_ENABLED
    ? createMetrics({
        build,
        readiness,
        databasePool: () => poolState(db),
        keycloakNodes,
        worker: worker?.id,
      })
    : metricsOff;
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
  const forwarding = createForwarding(config.TRUSTED_PROXIES);
  const bus = await openBus(config, logger, worker, clock);
  return {
    config,
    logger,
    clock,
    worker,
    db,
    schema,
    cache,
    cacheSecret: config.REALMGATE_CACHE_SECRET ?? randomBytes(32).toString('base64url'),
    bus,
    keycloakNodes,
    readiness,
    build,
    metrics,
    exposition: workerExposition(metrics, worker),
    tracing,
    forwarding,
    audit: createAudit(logger, (req) => forwarding.clientAddress(req)),
    async close() {
      schema.stop();
      keycloakNodes.close();
      await cache.close();
      await bus?.close();
      await db.destroy();
      // Last: the spans of the requests that drained are exported too.
      await tracing?.shutdown();
    },
  };
}

/**
 * What replicas tell each other (revocations, organization changes, key-set refreshes), over
 * one pair of Redis connections; without Redis, what the workers of one gateway tell each
 * other, over IPC. With both, a worker tells its siblings through the supervising process too:
 * at once, even while Redis is down.
 */
async function openBus(
  config: Config,
  logger: Logger,
  worker: WorkerRole | undefined,
  clock: Clock,
): Promise<ReplicaBus | undefined> {
  const redisBus = config.REDIS_URL
    ? await createReplicaBus({ redisUrl: config.REDIS_URL, logger })
    : undefined;
  const workerBus = worker && createIpcBus(worker.peer);
  return redisBus && workerBus ? combineBuses(redisBus, workerBus, clock) : (redisBus ?? workerBus);
}

/** A worker's `/metrics` shows the whole gateway: the supervising process gathers every worker's. */
function workerExposition(
  metrics: Metrics,
  worker: WorkerRole | undefined,
): Exposition | undefined {
  const registry = metrics.registry;
  if (!worker || !registry) return undefined;
  worker.peer.serve('metrics', () => registry.getMetricsAsJSON());
  return {
    contentType: registry.contentType,
    metrics: () => worker.peer.call<string>('metrics.cluster'),
  };
}
