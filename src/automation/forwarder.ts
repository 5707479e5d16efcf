import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { workspaceRolesOf } from '../auth/authorize.ts';
import type { Principal } from '../tenancy/principal.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import type { AdmittedScope } from '../edge/request-scope.ts';
import {
  answerHeadersOf,
  IDENTITY_HEADERS,
  upstreamRequestHeaders,
} from '../edge/upstream-headers.ts';
import { bodyFraming, createUpstream, sendBody } from '../edge/upstream.ts';
import { sendError } from '../envelope/error-handler.ts';
import { AppError } from '../envelope/errors.ts';
import { endSpan, type Tracing } from '../tracing/tracing.ts';

const base64Lines = (lines: string[]) => Buffer.from(lines.join('\n'), 'utf8').toString('base64');

/** Drops the client's `traceparent`/`tracestate` from `headers` and adds `trace` instead. */
function replaceTraceHeaders(headers: string[], trace: string[]): void {
  for (let i = headers.length - 2; i >= 0; i -= 2) {
    const name = headers[i]!.toLowerCase();
    if (name === 'traceparent' || name === 'tracestate') headers.splice(i, 2);
  }
  headers.push(...trace);
}

/**
 * Forwards one admitted request: its scope's path, with its scope's principal; the answer
 * carries the scope's request id as `X-Request-Id`.
 */
export type Forwarder = (req: IncomingMessage, res: ServerResponse, scope: AdmittedScope) => void;

/**
 * Forwards a request to the automation service with who the caller is instead of their
 * credentials: `User-Id`, `Roles` (workspace roles) and `Org-Roles` (realm roles) as base64 of
 * newline-joined lists, `Language` (default `ja`) and `organization_id`, plus the
 * `X-Forwarded-*` headers the gateway vouches for and the `X-Request-Id` the client gets back.
 * The client's other headers pass through the edge's filter (edge/upstream-headers.ts), the body
 * by the edge's one body rule (edge/upstream.ts). The path is the canonical one the admission
 * read. This is the route production traffic takes.
 */
export function createForwarder(options: {
  upstreamUrl: string;
  timeoutMs: number;
  forwarding: Forwarding;
  logger: Logger;
  /** When set, each forward is a client span, named in the `traceparent` the upstream gets. */
  tracing?: Tracing;
}): Forwarder {
  const tracing = options.tracing;
  // Addressed by its origin: the service gets the admitted `/api/...` path as it is, whatever
  // path AUTOMATION_UPSTREAM_URL may carry.
  const upstream = createUpstream(new URL(options.upstreamUrl).origin, {
    maxSockets: 1024,
    socketTimeoutMs: options.timeoutMs,
  });

  // Per verified token, the identity headers are the same on every request: build them once,
  // as name/value pairs after the upstream's Host.
  const identities = new WeakMap<Principal, string[]>();
  const identityOf = (principal: Principal): string[] => {
    let identity = identities.get(principal);
    if (!identity) {
      identity = [
        'host',
        upstream.host,
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
    // Headers as a flat [name, value, ...] list, as received: node writes such a list as is,
    // where an object would go through setHeader (validation, a map) once per header.
    const headers = upstreamRequestHeaders(req.rawHeaders, { keepCredentials: false });
    headers.push(
      ...options.forwarding.forwardedHeaders(req),
      ...identityOf(principal),
      'x-request-id',
      requestId,
      ...bodyFraming(req),
    );
    const span = tracing?.start('forward', 'client', { 'server.address': upstream.host });
    if (span) replaceTraceHeaders(headers, tracing!.headersOf(span));

    const outgoing = upstream.request(
      req.method!,
      target.path + target.query,
      headers,
      options.timeoutMs,
    );
    outgoing.on('response', (incoming) => {
      if (span) {
        span.setAttribute('http.response.status_code', incoming.statusCode ?? 0);
        incoming.once('close', () => endSpan(span));
      }
      const answer = answerHeadersOf(incoming);
      answer['x-request-id'] = requestId;
      res.writeHead(incoming.statusCode ?? 502, answer);
      incoming.pipe(res);
    });
    outgoing.on('timeout', () => outgoing.destroy(new AppError('upstreamTimeout')));
    outgoing.on('error', (err) => {
      if (span?.isRecording()) endSpan(span, err);
      const failure =
        err instanceof AppError
          ? err
          : new AppError(
              (err as NodeJS.ErrnoException).code === 'ECONNREFUSED'
                ? 'upstreamUnavailable'
                : 'upstreamBadGateway',
              { cause: err },
            );
      if (!res.headersSent) res.setHeader('x-request-id', requestId);
      sendError(res, failure, options.logger);
    });
    sendBody(req, outgoing);
  };
}
