import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { sendError } from '../envelope/error-handler.ts';
import { AppError } from '../envelope/errors.ts';
import { logFinished } from './access-log.ts';
import { requestIdOf } from './request-id.ts';
import type { Tracing } from '../tracing/tracing.ts';
import type { CanonicalHost } from './canonical-host.ts';
import { inRequest } from './request-context.ts';
import { enterScope, type RequestScope } from './request-scope.ts';
import { parseRequestTarget } from './request-target.ts';
import type { RouteClass, RouteReader } from './route.ts';

/** What the edge counts of each request. The metrics (metrics/metrics.ts) implement it. */
export interface RequestMetrics {
  request(
    route: RouteClass,
    method: string | undefined,
    status: number,
    authorization: string | undefined,
    seconds: number,
  ): void;
}

/**
 * Told of each `/api` request once its answer is sent or its client has gone (the audit log's
 * decisions): the scope carries the caller admitted or the admission's refusal.
 */
export type ApiOutcomeListener = (
  req: IncomingMessage,
  res: ServerResponse,
  scope: RequestScope,
) => void;

/** A route served on the HTTP server itself; it writes the scope's `X-Request-Id` itself. */
export type EdgeRoute = (req: IncomingMessage, res: ServerResponse, scope: RequestScope) => void;

/**
 * The first step of every request on either listener, before any routing: a request id, the
 * access log line and the request metrics, exactly one `Host` header (RFC 9112 3.2; none is
 * allowed in HTTP/1.0), no transfer coding but `chunked` alone, and one canonical meaning of the
 * path (see request-target.ts), read once into the request's route by `routes` (route.ts,
 * compiled from the route tables) and its scope (request-scope.ts). Then the request goes to
 * `forwarded` when its entry is the forwarded one, else to express. Whatever throws here is
 * answered in the envelope; the process lives on.
 */
export function createEdge(deps: {
  logger: Logger;
  app: RequestListener;
  /** The route tables compiled (route.ts): the one reader of paths. */
  routes: RouteReader;
  /** The forwarded automation route, when `AUTOMATION_UPSTREAM_URL` is set. */
  forwarded?: EdgeRoute;
  /** The admin listener's console pages answer only on its own address (canonical-host.ts). */
  canonicalHost?: CanonicalHost;
  metrics: RequestMetrics;
  /** When set, each request is a server span and everything below runs inside it. */
  tracing?: Tracing;
  /** When set, told of every `/api` request's outcome. */
  apiOutcomes?: ApiOutcomeListener;
}): RequestListener {
  const { logger, app, routes, forwarded, metrics, tracing, apiOutcomes } = deps;
  const listener = (req: IncomingMessage, res: ServerResponse, requestId = requestIdOf(req)) => {
    const started = performance.now();
    // Until the path is read, a request counts as 'other' (e.g. one refused for its Host).
    let routeClass: RouteClass = 'other';
    // `on`, not `once`: a response closes once, and `once` costs a wrapper and a removal.
    // 'close', not 'finish': a client gone before its whole answer has its line too; the
    // metrics count answers only.
    res.on('close', () => {
      const seconds = (performance.now() - started) / 1000;
      if (res.writableFinished) {
        metrics.request(routeClass, req.method, res.statusCode, req.headers.authorization, seconds);
      }
      logFinished(req, res, requestId, seconds, logger);
    });
    try {
      const hosts = hostCount(req.rawHeaders);
      if (hosts > 1 || (hosts === 0 && req.httpVersionMinor >= 1)) {
        throw new AppError('badRequestHeader', { message: 'One Host header is required.' });
      }
      // Node takes `gzip, chunked` and hands the body over still gzipped: nothing here decodes
      // it, and an upstream would get it bare, its coding dropped with the hop-by-hop headers.
      const coding = req.headers['transfer-encoding'];
      if (coding !== undefined && coding.toLowerCase() !== 'chunked') {
        throw new AppError('badRequestHeader', { message: 'Transfer-Encoding must be chunked.' });
      }
      const target = parseRequestTarget(req.url);
      if ('refused' in target) throw new AppError('badRequestHeader', { message: target.refused });
      const route = routes(target.segments, req.method);
      const elsewhere = deps.canonicalHost?.(req, target, route);
      if (elsewhere !== undefined) {
        res.writeHead(302, {
          location: elsewhere,
          'x-request-id': requestId,
          'cache-control': 'no-store',
          'content-length': 0,
        });
        res.end();
        return;
      }
      routeClass = route.metricsClass;
      const scope: RequestScope = { requestId, target, route, principal: undefined };
      if (apiOutcomes && target.segments[0] === 'api') {
        // 'close', not 'finish': a client gone before its answer was decided on too.
        res.on('close', () => apiOutcomes(req, res, scope));
      }
      // Both may call Keycloak (an admission that must ask, the admin API, /auth): under the
      // request's id.
      if (forwarded && route.entry?.forwarded) {
        inRequest(requestId, forwarded, req, res, scope);
        return;
      }
      enterScope(req, scope);
      res.setHeader('x-request-id', requestId);
      req.url = target.path + target.query;
      inRequest(requestId, app, req, res);
    } catch (err) {
      if (!res.headersSent) res.setHeader('x-request-id', requestId);
      sendError(res, err, logger);
    }
  };
  if (tracing === undefined) return listener;
  return (req, res) => {
    const requestId = requestIdOf(req);
    tracing.within(tracing.serveRequest(req, res, requestId), listener, req, res, requestId);
  };
}

/** How many `Host` headers came (Node keeps only the first in `req.headers`). */
function hostCount(rawHeaders: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') count++;
  }
  return count;
}
