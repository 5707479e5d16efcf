import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Admission } from '../auth/admission.ts';
import type { Config } from '../config/config.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import type { ProxyMetrics } from '../outbound/proxy-failures.ts';
import type { Tracing } from '../tracing/tracing.ts';
import type { EdgeRoute } from '../edge/edge.ts';
import { createForwardRoute } from './forward-route.ts';
import { createForwarder } from './forwarder.ts';
import { createOperationsRepo, type OperationsRepo } from './operations.repo.ts';

/**
 * The automation route, one way or the other: forwarded to `AUTOMATION_UPSTREAM_URL` (served by
 * the edge before express), or the built-in operation list (a table of `/api`).
 */
export interface AutomationArea {
  /** The forwarded route, when an upstream is configured. */
  forwarded?: EdgeRoute;
  /** The built-in operation list's service, when none is. */
  operations?: OperationsRepo;
}

/** Builds the forwarded route when an upstream is configured, else the built-in operation list. */
export function buildAutomation(
  shared: {
    config: Config;
    logger: Logger;
    db: Knex;
    forwarding: Forwarding;
    tracing: Tracing | undefined;
    metrics: ProxyMetrics;
  },
  admission: Admission,
): AutomationArea {
  const { config, logger } = shared;
  if (config.AUTOMATION_UPSTREAM_URL === undefined) {
    return { operations: createOperationsRepo(shared.db) };
  }
  const forward = createForwarder({
    upstreamUrl: config.AUTOMATION_UPSTREAM_URL,
    timeoutMs: config.AUTH_PROXY_TIMEOUT_MS,
    answerDeadlineMs: config.PROXY_ANSWER_DEADLINE_SECONDS * 1000,
    forwarding: shared.forwarding,
    logger,
    tracing: shared.tracing,
    metrics: shared.metrics,
  });
  return { forwarded: createForwardRoute({ admission, forward, logger }) };
}
