import express, { type Express, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import { createErrorHandler, notFoundHandler } from './envelope/error-handler.ts';
import { createHealthRouter, type ReadinessCheck } from './http/health.router.ts';
import { withoutOptionsAnswer } from './http/listener-router.ts';
import type { Listener } from './auth-proxy/auth-steps.ts';
import { BACKCHANNEL_LOGOUT_PATH } from './auth-proxy/backchannel-logout.ts';
import type { Metrics } from './metrics/metrics.ts';
import type { BuildInfo } from './release/build-info.ts';
import { serveMetrics, type Exposition } from './metrics/metrics.router.ts';

export type { Listener };

export interface AppDeps {
  logger: Logger;
  /** The `/auth` mount of a listener: its steps, then the proxy (auth-proxy/auth-steps.ts). */
  authMount: (listener: Listener) => RequestHandler;
  /** Logout tokens Keycloak posts to the admin listener (auth-proxy/backchannel-logout.ts). */
  backchannelLogout: RequestHandler;
  /** The protected-resource metadata (RFC 9728, auth/resource-metadata.ts): public, on both listeners. */
  resourceMetadata: RequestHandler;
  /** The public keys of audit log checkpoints (audit/audit-keys.router.ts): public, on both listeners. */
  auditKeys: RequestHandler;
  /** Everything under `/api` (see api/api.router.ts). */
  api: RequestHandler;
  readiness: Record<string, ReadinessCheck>;
  /** The version and revision the admin listener's `/healthz` shows. */
  build: BuildInfo;
  /** True once the gateway has begun to shut down: `/readyz` then answers 503 at once. */
  isShuttingDown: () => boolean;
  metrics: Metrics;
  /** What `/metrics` shows when not this process's registry alone: every worker's (WORKERS > 1). */
  exposition?: Exposition;
}

/**
 * Builds the express app of one listener. Both listeners serve the same API; only the admin
 * listener lets `/auth/admin/` (Keycloak's console and admin REST API) through.
 * No I/O happens here: dependencies arrive ready. Every request has passed the edge
 * (edge/edge.ts) before it gets here: request id, access log, canonical path.
 */
export function createApp(deps: AppDeps, listener: Listener): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  // `/API/...` is not `/api/...`: the edge and the forwarder read paths as they are written.
  app.set('case sensitive routing', true);

  app.use(
    withoutOptionsAnswer(
      createHealthRouter(
        deps.readiness,
        deps.isShuttingDown,
        deps.logger,
        listener === 'admin',
        deps.build,
      ),
    ),
  );
  // Operators' data (traffic, failure reasons, dependency state): the admin listener only; the
  // public one answers 404 like any unknown path.
  const registry = deps.metrics.registry;
  if (listener === 'admin' && registry) {
    app.get('/metrics', serveMetrics(deps.exposition ?? registry));
  }
  // Keycloak's announcements of ended sessions: the admin listener only, as `/metrics`.
  if (listener === 'admin') app.post(BACKCHANNEL_LOGOUT_PATH, deps.backchannelLogout);

  app.use(withoutOptionsAnswer(deps.resourceMetadata));
  app.use(withoutOptionsAnswer(deps.auditKeys));

  // Before any body parser: the mount's own form guard reads /auth bodies, and hands them on.
  // Each /auth path runs the steps its entry names, then the proxy (auth-proxy/auth-steps.ts).
  app.use('/auth', deps.authMount(listener));

  // Realm routing, authentication, list endpoints and provisioning (see api/api.router.ts).
  app.use('/api', deps.api);

  app.use(notFoundHandler);
  app.use(createErrorHandler(deps.logger));
  return app;
}
