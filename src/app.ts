import express, { type Express, type RequestHandler } from 'express';
import type { Logger } from 'pino';
import { createErrorHandler, notFoundHandler } from './envelope/error-handler.ts';
import type { Forwarding } from './edge/forwarding.ts';
import type { FailedLoginMemory } from './auth/failed-logins.ts';
import type { LoginThrottle } from './auth/login-throttle.ts';
import { throttlePasswordAttempts } from './auth-proxy/password-attempt-throttle.ts';
import { createHealthRouter, type ReadinessCheck } from './http/health.router.ts';
import { createAuthProxy, guardAuthPath } from './auth-proxy/auth-proxy.ts';
import { guardBootstrapAdmin } from './auth-proxy/bootstrap-admin-guard.ts';
import { guardFormBody } from './auth-proxy/form-body-guard.ts';
import { endAccessOnSuccess, type EndAccessDeps } from './auth-proxy/end-access.ts';
import { jobCredentials, type JobCredentialsDeps } from './auth-proxy/job-credentials.ts';
import type { KeycloakNodes } from './keycloak/keycloak-nodes.ts';
import type { Metrics } from './metrics/metrics.ts';
import type { BuildInfo } from './release/build-info.ts';
import { serveMetrics, type Exposition } from './metrics/metrics.router.ts';

export type Listener = 'public' | 'admin';

export interface AppDeps {
  logger: Logger;
  /** Keycloak's nodes (one or several), shared with the gateway's own calls. */
  keycloakNodes: KeycloakNodes;
  publicUrl: string;
  /** `ADMIN_PUBLIC_URL`: where the admin listener's console pages are served. */
  adminUrl: string;
  authProxyTimeoutMs: number;
  forwarding: Forwarding;
  /** Keycloak's bootstrap administrator: never tried on the public listener. */
  bootstrapAdmin: string;
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
  /** Counts password attempts on `/auth` as it counts Basic logins on the API. */
  loginThrottle: LoginThrottle;
  /** Wrong passwords refused within the throttle's window, shared with Basic. */
  failedLogins: FailedLoginMemory;
  /** Applies what logouts, revocations and admin-API changes end in Keycloak (end-access.ts). */
  endAccess: EndAccessDeps;
  /** Names, reaches and lifetimes given at issuance, on the token endpoint (job-credentials.ts). */
  jobCredentials: JobCredentialsDeps;
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
    createHealthRouter(
      deps.readiness,
      deps.isShuttingDown,
      deps.logger,
      listener === 'admin',
      deps.build,
    ),
  );
  // Operators' data (traffic, failure reasons, dependency state): the admin listener only; the
  // public one answers 404 like any unknown path.
  const registry = deps.metrics.registry;
  if (listener === 'admin' && registry) {
    app.get('/metrics', serveMetrics(deps.exposition ?? registry));
  }

  // Before any other body parser: only the form guard reads /auth bodies, and hands them on.
  app.use(
    '/auth',
    guardAuthPath({ allowAdmin: listener === 'admin' }),
    ...guardFormBody(),
    ...(listener === 'public' ? [guardBootstrapAdmin(deps.bootstrapAdmin)] : []),
    jobCredentials(deps.jobCredentials),
    throttlePasswordAttempts({
      throttle: deps.loginThrottle,
      failedLogins: deps.failedLogins,
      clientAddress: (req) => deps.forwarding.clientAddress(req),
      metrics: deps.metrics,
      logger: deps.logger,
    }),
    endAccessOnSuccess(deps.endAccess),
    createAuthProxy({
      nodes: deps.keycloakNodes,
      publicUrl: deps.publicUrl,
      timeoutMs: deps.authProxyTimeoutMs,
      forwarding: deps.forwarding,
      logger: deps.logger,
      adminPages:
        listener === 'admin' ? { publicUrl: deps.publicUrl, adminUrl: deps.adminUrl } : undefined,
    }),
  );

  // Realm routing, authentication, list endpoints and provisioning (see api/api.router.ts).
  app.use('/api', deps.api);

  app.use(notFoundHandler);
  app.use(createErrorHandler(deps.logger));
  return app;
}
