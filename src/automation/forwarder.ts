import {
  Agent,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { Logger } from 'pino';
import { workspaceRolesOf } from '../auth/authorize.ts';
import type { Principal } from '../tenancy/principal.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import type { AdmittedScope } from '../edge/request-scope.ts';
import { upstreamRequestHeaders } from '../edge/upstream-headers.ts';
import { sendError } from '../envelope/error-handler.ts';
import { AppError } from '../envelope/errors.ts';
import { endSpan, type Tracing } from '../tracing/tracing.ts';

/** Connection-level headers of the upstream's answer (RFC 9110 7.6.1); never relayed. */
const HOP_BY_HOP_RESPONSE = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

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
 * `X-Forwarded-*` headers the gateway vouches for and the `X-Request-Id` the client gets back. The client's other headers pass through the
 * edge's filter (edge/upstream-headers.ts). The path is the canonical one the admission read.
 * Plain `node:http` with a keep-alive pool: this is the route production traffic takes.
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
  const upstream = new URL(options.upstreamUrl);
  const secure = upstream.protocol === 'https:';
  // The agent's timeout equals each request's, so a reused socket keeps its timer instead of
  // having it replaced on every request; it also closes keep-alive sockets idle that long.
  const agentOptions = { keepAlive: true, maxSockets: 1024, timeout: options.timeoutMs };
  const agent = secure ? new HttpsAgent(agentOptions) : new Agent(agentOptions);
  const request = secure ? httpsRequest : httpRequest;

  // Per verified token, the identity headers are the same on every request: build them once,
  // as name/value pairs after the upstream's Host.
  const identities = new WeakMap<Principal, string[]>();
  const identityOf = (principal: Principal): string[] => {
    let identity = identities.get(principal);
    if (!identity) {
      identity = [
        'host',
        upstream.host,
        'user-id',
        principal.userId,
        'roles',
        base64Lines(workspaceRolesOf(principal)),
        'org-roles',
        base64Lines(principal.realmRoles),
        'language',
        principal.locale ?? 'ja',
        'organization_id',
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
    );
    const span = tracing?.start('forward', 'client', { 'server.address': upstream.host });
    if (span) replaceTraceHeaders(headers, tracing!.headersOf(span));

    const outgoing = request({
      agent,
      protocol: upstream.protocol,
      hostname: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: target.path + target.query,
      headers,
      timeout: options.timeoutMs,
    });
    outgoing.on('response', (incoming) => {
      if (span) {
        span.setAttribute('http.response.status_code', incoming.statusCode ?? 0);
        incoming.once('close', () => endSpan(span));
      }
      const answer: OutgoingHttpHeaders = {};
      for (const name in incoming.headers) {
        if (!HOP_BY_HOP_RESPONSE.has(name)) answer[name] = incoming.headers[name];
      }
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
    // A request without Content-Length or Transfer-Encoding has no body (RFC 9112 6.3).
    const hasBody =
      req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
    if (hasBody) req.pipe(outgoing);
    else outgoing.end();
  };
}
