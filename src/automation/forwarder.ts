import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { workspaceRolesOf } from '../auth/authorize.ts';
import type { Principal } from '../tenancy/principal.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import type { AdmittedScope } from '../edge/request-scope.ts';
import { AppError } from '../envelope/errors.ts';
import { failedBeforeSending } from '../keycloak/keycloak-failures.ts';
import { clientForwardedHeaders } from '../outbound/forwarded-headers.ts';
import { forward, UpstreamSilent, type OutboundHandlers } from '../outbound/forward.ts';
import { IDENTITY_HEADERS } from '../outbound/upstream-headers.ts';
import type { ProxyFailureCause, ProxyMetrics } from '../outbound/proxy-failures.ts';
import { createUpstream } from '../outbound/upstream.ts';
import type { Tracing } from '../tracing/tracing.ts';

const base64Lines = (lines: string[]) => Buffer.from(lines.join('\n'), 'utf8').toString('base64');

/**
 * Forwards one admitted request: its scope's path, with its scope's principal; the answer
 * carries the scope's request id as `X-Request-Id`.
 */
export type Forwarder = (req: IncomingMessage, res: ServerResponse, scope: AdmittedScope) => void;

/**
 * The automation service's failures as the client sees them: 504 silent; 503 (with Retry-After)
 * when nothing reached it, by the one table of network errors that says so for Keycloak too
 * (refused, its name not resolved as a stopped compose service's, no route to it); else 502.
 */
const HANDLERS: OutboundHandlers = {
  failed: (err) => {
    if (err instanceof UpstreamSilent) return new AppError('upstreamTimeout', { cause: err });
    const unreached = failedBeforeSending(err);
    return new AppError(unreached ? 'upstreamUnavailable' : 'upstreamBadGateway', { cause: err });
  },
};

/**
 * Forwards a request to the automation service with who the caller is instead of their
 * credentials: `User-Id`, `Roles` (workspace roles) and `Org-Roles` (realm roles) as base64 of
 * newline-joined lists, `Language` (default `ja`) and `organization_id`, plus the
 * `X-Forwarded-*` headers the gateway vouches for about the client, through the one outbound
 * `forward` (outbound/forward.ts: header table, request id, trace headers, body, relay). The
 * path is the canonical one the admission read. This is the route production traffic takes.
 */
export function createForwarder(options: {
  upstreamUrl: string;
  timeoutMs: number;
  /** How long an answer may go on once it lasts (outbound/forward.ts). */
  answerDeadlineMs: number;
  forwarding: Forwarding;
  logger: Logger;
  /** When set, each forward is a client span, named in the `traceparent` the upstream gets. */
  tracing?: Tracing;
  /** Counts the failures (`upstream` `automation`). */
  metrics?: ProxyMetrics;
}): Forwarder {
  const { tracing, forwarding, timeoutMs, answerDeadlineMs, logger } = options;
  // Addressed by its origin: the service gets the admitted `/api/...` path as it is, whatever
  // path AUTOMATION_UPSTREAM_URL may carry.
  const upstream = createUpstream(new URL(options.upstreamUrl).origin, {
    maxSockets: 1024,
    socketTimeoutMs: timeoutMs,
  });

  const { metrics } = options;
  const countFailure =
    metrics && ((cause: ProxyFailureCause) => metrics.proxyFailure('automation', cause));

  // Per verified token, the identity headers are the same on every request: build them once.
  const identities = new WeakMap<Principal, string[]>();
  const identityOf = (principal: Principal): string[] => {
    let identity = identities.get(principal);
    if (!identity) {
      identity = [
        IDENTITY_HEADERS.userId,
        principal.userId,
        IDENTITY_HEADERS.roles,
        base64Lines(workspaceRolesOf(principal)),
        IDENTITY_HEADERS.orgRoles,
        base64Lines(principal.realmRoles),
        IDENTITY_HEADERS.language,
        principal.locale ?? 'ja',
        IDENTITY_HEADERS.organizationId,
        principal.realm,
      ];
      identities.set(principal, identity);
    }
    return identity;
  };

  return (req, res, { principal, target, requestId }) => {
    const span = tracing?.start('forward', 'client', { 'server.address': upstream.host });
    const headers = clientForwardedHeaders(forwarding.forwarded(req));
    headers.push(...identityOf(principal));
    forward(
      req,
      res,
      {
        upstream,
        client: forwarding.clientAddress(req),
        path: target.path + target.query,
        keepCredentials: false,
        headers,
        requestId,
        trace: span && tracing!.headersOf(span),
        span,
        timeoutMs,
        answerDeadlineMs,
        countFailure,
        logger,
      },
      HANDLERS,
    );
  };
}
