import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';
import {
  AUTH_CACHES,
  AUTH_FAILURE_COUNTED_REASONS,
  AUTH_FAILURE_SCHEMES,
  RECHECK_EVENTS,
  REVOCATION_SOURCES,
  type AuthMetrics,
} from '../auth/auth-metrics.ts';
import type { RequestMetrics } from '../edge/edge.ts';
import { BACKCHANNEL_REFUSALS, type BackchannelMetrics } from '../auth-proxy/backchannel-logout.ts';
import { AUDIT_RECORD_OUTCOMES, type AuditMetrics } from '../audit/audit-writer.ts';
import { KEYCLOAK_EVENT_PURPOSES } from '../audit/keycloak-event-cursors.ts';
import {
  KEYCLOAK_EVENT_PULL_OUTCOMES,
  type KeycloakEventMetrics,
} from '../audit/keycloak-event-pull.ts';
import { probe, type ReadinessCheck } from '../http/health.router.ts';
import type { KeycloakNodes } from '../keycloak/keycloak-nodes.ts';
import type { BuildInfo } from '../release/build-info.ts';
import {
  KEYCLOAK_CALL_KINDS,
  KEYCLOAK_CALL_OUTCOMES,
  type KeycloakCallKind,
  type KeycloakCallOutcome,
} from '../keycloak/keycloak-calls.ts';
import { CounterTable, HistogramTable } from './metric-table.ts';
import { ROUTE_CLASSES } from '../edge/route.ts';
import {
  PROXY_FAILURE_CAUSES,
  PROXY_UPSTREAMS,
  type ProxyMetrics,
} from '../outbound/proxy-failures.ts';

/** A logout token's fate at the back-channel logout endpoint: accepted, or why it was refused. */
const BACKCHANNEL_OUTCOMES = ['accepted', ...BACKCHANNEL_REFUSALS] as const;

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'other'] as const;
const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;
const AUTH_SCHEMES = ['none', 'basic', 'bearer', 'dpop', 'other'] as const;
const CACHE_RESULTS = ['hit', 'miss'] as const;
/** Seconds; requests through the gateway are mostly well under 10 ms, logins well over. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * What the gateway counts. Every method is cheap enough for the hot path: a few comparisons
 * and an array increment, no allocation, no promise. With metrics off (METRICS_ENABLED=false)
 * every method does nothing and there is no registry.
 */
export interface Metrics
  extends
    RequestMetrics,
    AuthMetrics,
    BackchannelMetrics,
    AuditMetrics,
    KeycloakEventMetrics,
    ProxyMetrics {
  /** The registry `/metrics` renders; undefined when metrics are off. */
  readonly registry: Registry | undefined;
  keycloakCall(kind: KeycloakCallKind, outcome: KeycloakCallOutcome, seconds: number): void;
}

export const metricsOff: Metrics = {
  registry: undefined,
  request() {},
  authFailure() {},
  cacheLookup() {},
  keycloakCall() {},
  recheck() {},
  revocationApplied() {},
  backchannelLogout() {},
  auditRecords() {},
  keycloakEventPull() {},
  proxyFailure() {},
};

/**
 * Builds the gateway's metrics in a registry of its own (several gateways may share a process in
 * tests). The readiness checks run at each scrape, as `realmgate_dependency_up`; the database
 * pool is read then too, as `realmgate_database_connections`.
 */
export function createMetrics(options: {
  readiness: Record<string, ReadinessCheck>;
  databasePool?: () => { used: number; free: number; pending: number } | undefined;
  /** Keycloak's nodes: their states as `realmgate_keycloak_node_up`. */
  keycloakNodes?: Pick<KeycloakNodes, 'all'>;
  /** This worker's number when the gateway runs several (WORKERS): its requests are counted. */
  worker?: string;
  /** What runs: `realmgate_build_info`. */
  build: BuildInfo;
}): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  const requests = new CounterTable({
    name: 'realmgate_http_requests_total',
    help: 'Requests answered, by route class, method, status class and authentication scheme.',
    labels: [
      { name: 'route', values: ROUTE_CLASSES },
      { name: 'method', values: METHODS },
      { name: 'status', values: STATUS_CLASSES },
      { name: 'auth', values: AUTH_SCHEMES },
    ],
  });
  const durations = new HistogramTable({
    name: 'realmgate_http_request_duration_seconds',
    help: 'Time from the request reaching the gateway to the last byte of the answer, by route class.',
    labels: [{ name: 'route', values: ROUTE_CLASSES }],
    buckets: LATENCY_BUCKETS,
  });
  const authFailures = new CounterTable({
    name: 'realmgate_auth_failures_total',
    help: 'Refused authentications, by scheme and reason.',
    labels: [
      { name: 'scheme', values: AUTH_FAILURE_SCHEMES },
      { name: 'reason', values: AUTH_FAILURE_COUNTED_REASONS },
    ],
    showZeros: true,
  });
  const cacheLookups = new CounterTable({
    name: 'realmgate_cache_lookups_total',
    help: 'Authentications answered from a cache (hit) or not (miss): verified tokens, Basic logins.',
    labels: [
      { name: 'cache', values: AUTH_CACHES },
      { name: 'result', values: CACHE_RESULTS },
    ],
    showZeros: true,
  });
  const keycloakCalls = new CounterTable({
    name: 'realmgate_keycloak_requests_total',
    help: "The gateway's own calls to Keycloak, by kind and outcome.",
    labels: [
      { name: 'kind', values: KEYCLOAK_CALL_KINDS },
      { name: 'outcome', values: KEYCLOAK_CALL_OUTCOMES },
    ],
    showZeros: true,
  });
  const keycloakDurations = new HistogramTable({
    name: 'realmgate_keycloak_request_duration_seconds',
    help: "Duration of the gateway's own calls to Keycloak, by kind.",
    labels: [{ name: 'kind', values: KEYCLOAK_CALL_KINDS }],
    buckets: LATENCY_BUCKETS,
  });
  const rechecks = new CounterTable({
    name: 'realmgate_token_rechecks_total',
    help:
      'Re-checks of verified tokens with Keycloak: queued, skipped at the rate cap, run ' +
      '(active, inactive, failed), and late (the request was served before the answer).',
    labels: [{ name: 'event', values: RECHECK_EVENTS }],
    showZeros: true,
  });
  const revocations = new CounterTable({
    name: 'realmgate_revocations_applied_total',
    help: 'Session revocations applied here: made by this replica (local) or by another one (peer).',
    labels: [{ name: 'source', values: REVOCATION_SOURCES }],
    showZeros: true,
  });
  const backchannel = new CounterTable({
    name: 'realmgate_backchannel_logout_tokens_total',
    help:
      'Logout tokens Keycloak posted to the back-channel logout endpoint: accepted, or refused ' +
      'for the reason given.',
    labels: [{ name: 'outcome', values: BACKCHANNEL_OUTCOMES }],
    showZeros: true,
  });
  const auditRecords = new CounterTable({
    name: 'realmgate_audit_records_total',
    help:
      'Audit log records written to the database, or lost: the spool full while the database ' +
      'was down (AUDIT_SPOOL_MAX_RECORDS), still spooled when the process stopped, or refused ' +
      'by the database whatever the attempt (a value it cannot hold).',
    labels: [{ name: 'outcome', values: AUDIT_RECORD_OUTCOMES }],
    showZeros: true,
  });
  const keycloakEventPulls = new CounterTable({
    name: 'realmgate_audit_keycloak_pulls_total',
    help:
      "Pulls of one realm's Keycloak events, for the audit log's records or the auth area's " +
      'credential changes (also while the log is off), done or failed (Keycloak or the ' +
      'database unavailable: the events wait in Keycloak and come with a later pull).',
    labels: [
      { name: 'purpose', values: KEYCLOAK_EVENT_PURPOSES },
      { name: 'outcome', values: KEYCLOAK_EVENT_PULL_OUTCOMES },
    ],
    showZeros: true,
  });
  const proxyFailures = new CounterTable({
    name: 'realmgate_proxy_failures_total',
    help:
      'Requests through a proxy (/auth to Keycloak, the forwarded route to the automation ' +
      'service) that failed, by upstream and cause; each attempt of one sent to another node.',
    labels: [
      { name: 'upstream', values: PROXY_UPSTREAMS },
      { name: 'cause', values: PROXY_FAILURE_CAUSES },
    ],
    showZeros: true,
  });
  // One series per worker: a scrape of the aggregated metrics shows every worker served.
  const workerRequests = new CounterTable({
    name: 'realmgate_worker_requests_total',
    help: 'Requests answered, by the worker process that answered them (with WORKERS > 1).',
    labels: [{ name: 'worker', values: [options.worker ?? '1'] }],
    showZeros: true,
  });
  for (const table of [
    ...(options.worker === undefined ? [] : [workerRequests]),
    requests,
    durations,
    authFailures,
    cacheLookups,
    keycloakCalls,
    keycloakDurations,
    rechecks,
    revocations,
    backchannel,
    auditRecords,
    keycloakEventPulls,
    proxyFailures,
  ]) {
    registry.registerMetric(table.asPromMetric());
  }
  registerStateGauges(registry, options);

  const methodIndex = indexOf(METHODS);
  const reasonIndex = indexOf(AUTH_FAILURE_COUNTED_REASONS);
  const schemeOfFailureIndex = indexOf(AUTH_FAILURE_SCHEMES);
  const kindIndex = indexOf(KEYCLOAK_CALL_KINDS);
  const outcomeIndex = indexOf(KEYCLOAK_CALL_OUTCOMES);
  const recheckIndex = indexOf(RECHECK_EVENTS);
  const routeIndex = indexOf(ROUTE_CLASSES);
  const backchannelIndex = indexOf(BACKCHANNEL_OUTCOMES);
  const upstreamIndex = indexOf(PROXY_UPSTREAMS);
  const causeIndex = indexOf(PROXY_FAILURE_CAUSES);
  const cacheIndex = indexOf(AUTH_CACHES);
  const cacheResultIndex = indexOf(CACHE_RESULTS);
  const sourceIndex = indexOf(REVOCATION_SOURCES);
  const auditOutcomeIndex = indexOf(AUDIT_RECORD_OUTCOMES);
  const purposeIndex = indexOf(KEYCLOAK_EVENT_PURPOSES);
  const pullOutcomeIndex = indexOf(KEYCLOAK_EVENT_PULL_OUTCOMES);
  const otherMethod = METHODS.length - 1;

  return {
    registry,
    request(route, method, status, authorization, seconds) {
      const r = routeIndex[route];
      const m = (methodIndex as Record<string, number | undefined>)[method ?? ''] ?? otherMethod;
      const s = status < 100 ? 4 : Math.min(Math.floor(status / 100), 5) - 1;
      requests.inc(requests.slot(r, m, s, schemeIndex(authorization)));
      workerRequests.inc(0);
      durations.observe(r, seconds);
    },
    authFailure(scheme, reason) {
      authFailures.inc(authFailures.slot(schemeOfFailureIndex[scheme], reasonIndex[reason]));
    },
    cacheLookup(cache, hit) {
      const result = cacheResultIndex[hit ? 'hit' : 'miss'];
      cacheLookups.inc(cacheLookups.slot(cacheIndex[cache], result));
    },
    keycloakCall(kind, outcome, seconds) {
      const k = kindIndex[kind];
      keycloakCalls.inc(keycloakCalls.slot(k, outcomeIndex[outcome]));
      keycloakDurations.observe(k, seconds);
    },
    recheck(event) {
      rechecks.inc(recheckIndex[event]);
    },
    revocationApplied(source) {
      revocations.inc(sourceIndex[source]);
    },
    backchannelLogout(outcome) {
      backchannel.inc(backchannelIndex[outcome]);
    },
    auditRecords(outcome, count) {
      auditRecords.inc(auditOutcomeIndex[outcome], count);
    },
    keycloakEventPull(outcome, purpose) {
      keycloakEventPulls.inc(
        keycloakEventPulls.slot(purposeIndex[purpose], pullOutcomeIndex[outcome]),
      );
    },
    proxyFailure(upstream, cause) {
      proxyFailures.inc(proxyFailures.slot(upstreamIndex[upstream], causeIndex[cause]));
    },
  };
}

/**
 * The `auth` label from the Authorization header's scheme, read from its first letters without
 * copying the header: case-insensitive as RFC 9110 has it.
 */
function schemeIndex(authorization: string | undefined): number {
  if (authorization === undefined || authorization.length === 0) return 0;
  const first = authorization.charCodeAt(0) | 0x20;
  const second = authorization.charCodeAt(1) | 0x20;
  if (first === 0x62 /* b */ && second === 0x61 /* a */ && authorization.length > 5) return 1;
  if (first === 0x62 /* b */ && second === 0x65 /* e */ && authorization.length > 6) return 2;
  if (first === 0x64 /* d */ && second === 0x70 /* p */ && authorization.length > 4) return 3;
  return 4;
}

/** A lookup from value to position, without a prototype: a header can never name `__proto__`. */
function indexOf<T extends string>(values: readonly T[]): Record<T, number> {
  const index = Object.create(null) as Record<T, number>;
  values.forEach((value, position) => (index[value] = position));
  return index;
}

function registerStateGauges(
  registry: Registry,
  options: Parameters<typeof createMetrics>[0],
): void {
  new Gauge({
    name: 'realmgate_build_info',
    help: "The gateway's version, the git commit it was built from, and the Node.js running it; always 1.",
    labelNames: ['version', 'revision', 'node_version'],
    registers: [registry],
    // Every worker runs the same build: one series, not their sum.
    aggregator: 'max',
  }).set(
    {
      version: options.build.version,
      revision: options.build.revision,
      node_version: options.build.nodeVersion,
    },
    1,
  );
  new Gauge({
    name: 'realmgate_dependency_up',
    help:
      'Whether a dependency passed its readiness check when Prometheus scraped (1) or not (0); ' +
      'cache is 0 while Redis is configured but unreachable.',
    labelNames: ['dependency'],
    registers: [registry],
    // Across the workers of one gateway: up only when every worker saw it up.
    aggregator: 'min',
    async collect() {
      // Read at each scrape: the areas add their own checks (backchannel_logout, audit_log)
      // after the metrics are built.
      const names = Object.keys(options.readiness);
      const outcomes = await Promise.all(names.map((name) => probe(options.readiness[name]!)));
      names.forEach((name, i) => this.set({ dependency: name }, outcomes[i] === 'up' ? 1 : 0));
    },
  });
  const keycloakNodes = options.keycloakNodes;
  if (keycloakNodes) {
    new Gauge({
      name: 'realmgate_keycloak_node_up',
      help:
        'Whether the gateway sends calls to a Keycloak node (1) or has taken it out (0), by the ' +
        "node's position in KEYCLOAK_URL from 0: taken out on a connect error or timeout, back " +
        'once it answers.',
      labelNames: ['node'],
      registers: [registry],
      aggregator: 'min',
      collect() {
        for (const node of keycloakNodes.all) {
          this.set({ node: String(node.index) }, node.state === 'up' ? 1 : 0);
        }
      },
    });
  }
  if (!options.databasePool) return;
  const pool = options.databasePool;
  new Gauge({
    name: 'realmgate_database_connections',
    help: "The database pool's connections: used, free, and requests waiting for one (pending).",
    labelNames: ['state'],
    registers: [registry],
    // Each worker has its own pool: the gateway's connections are their sum.
    aggregator: 'sum',
    collect() {
      const counts = pool();
      if (!counts) return;
      this.set({ state: 'used' }, counts.used);
      this.set({ state: 'free' }, counts.free);
      this.set({ state: 'pending' }, counts.pending);
    },
  });
}
