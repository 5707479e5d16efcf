import type { RequestListener, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Admission } from '../../src/auth/admission.ts';
import { createForwardRoute, FORWARDED_ROUTE } from '../../src/automation/forward-route.ts';
import { createForwarder } from '../../src/automation/forwarder.ts';
import { createEdge } from '../../src/edge/edge.ts';
import { createForwarding } from '../../src/edge/forwarding.ts';
import { compileRoutes } from '../../src/edge/route.ts';
import { createLogger } from '../../src/http/logger.ts';
import { metricsOff } from '../../src/metrics/metrics.ts';
import type { ProxyMetrics } from '../../src/outbound/proxy-failures.ts';
import { listen } from '../../src/server.ts';

/** A path of the forwarded route: workspace `ws1` of organization `acme`. */
export const FORWARDED_PATH = '/api/acme/workspaces/ws1/ita/x';

/**
 * The gateway's own edge, forwarded route and forwarder to `upstreamUrl`, on a free port of
 * 127.0.0.1, its log silent and forwarding claims off. The test's `admission` stands in for
 * Keycloak's; `app` answers every other path (by default none is reached); `metrics` counts the
 * forwarder's failures. Resolves with its server (the test closes it) and its base URL.
 */
export async function startForwardedGateway(options: {
  upstreamUrl: string;
  admission: Admission;
  app?: RequestListener;
  metrics?: ProxyMetrics;
}): Promise<{ server: Server; base: string }> {
  const logger = createLogger('silent');
  const forwarded = createForwardRoute({
    admission: options.admission,
    forward: createForwarder({
      upstreamUrl: options.upstreamUrl,
      timeoutMs: 5000,
      answerDeadlineMs: 300_000,
      forwarding: createForwarding(undefined),
      logger,
      metrics: options.metrics,
    }),
    logger,
  });
  const edge = createEdge({
    logger,
    app:
      options.app ??
      (() => {
        throw new Error('express is not reached in this test');
      }),
    routes: compileRoutes([FORWARDED_ROUTE]),
    forwarded,
    metrics: metricsOff,
  });
  const server = await listen(edge, '127.0.0.1', 0, logger);
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}
