import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Span } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { sendError } from '../envelope/error-handler.ts';
import type { AppError } from '../envelope/errors.ts';
import { endSpan } from '../tracing/tracing.ts';
import { answerRawHeadersOf, upstreamRequestHeaders } from './upstream-headers.ts';
import { bodyFraming, sendBody, type Upstream } from './upstream.ts';

/** One request to send on: where, with what the gateway adds, and how long to wait. */
export interface Outbound {
  upstream: Upstream;
  /** The path on the upstream (after its base path), query included. */
  path: string;
  /** The client's `Authorization`, `Cookie` and `DPoP` travel on (Keycloak needs them). */
  keepCredentials: boolean;
  /** The gateway's own headers after the client's (`X-Forwarded-*`, identity), as name/value pairs. */
  headers: readonly string[];
  /** Sent as `X-Request-Id`, and given back to the client with the answer or the failure. */
  requestId: string | undefined;
  /**
   * `traceparent`/`tracestate` naming the gateway's span, sent instead of the client's; when
   * undefined (nothing traced) the client's pass on untouched.
   */
  trace: readonly string[] | undefined;
  /** A client span of this request: the answer's status recorded, ended with it or the failure. */
  span?: Span;
  /** The body read whole (the form guard's): sent as read, with its own length. */
  body?: Buffer;
  /** The answer is asked for uncompressed (the client's `Accept-Encoding` dropped): a step reads it. */
  uncompressed?: boolean;
  /** How long the upstream may stay silent (connecting, or between bytes of its answer). */
  timeoutMs: number;
  logger: Logger;
}

/** What a proxy does with the outcome, beyond what `forward` does for every one. */
export interface OutboundHandlers {
  /**
   * The upstream's answer arrived; without this it is relayed as it came (`relay`). `outgoing`
   * is the request, whose timeout a step may hold while it works on the answer.
   */
  answered?(answer: IncomingMessage, outgoing: ClientRequest): void;
  /**
   * The upstream failed (refused, cut off, or silent: `UpstreamSilent`), and the client is still
   * there: the error it gets (or, its answer begun, whose connection is cut), or undefined when
   * the proxy took care of it (sent the request elsewhere).
   */
  failed(err: Error): AppError | undefined;
}

/** The upstream stayed silent for the request's timeout: 504 for the client. */
export class UpstreamSilent extends Error {
  /** As a socket timeout is named, for the translations that read codes (keycloak-failures.ts). */
  readonly code = 'ETIMEDOUT';
  /** Struck while the connection was being made: nothing was sent, safe to send elsewhere. */
  readonly beforeConnect: boolean;
  constructor(timeoutMs: number, beforeConnect: boolean) {
    super(`the upstream did not answer within ${timeoutMs} ms`);
    this.beforeConnect = beforeConnect;
  }
}

const TRACE: ReadonlySet<string> = new Set(['traceparent', 'tracestate']);

/** The client's headers the gateway sets (or drops) itself for this request, beyond the table's. */
function replacedNames(o: Outbound): ReadonlySet<string> | undefined {
  if (o.body === undefined && o.uncompressed !== true) return o.trace ? TRACE : undefined;
  const names = new Set(o.trace ? TRACE : []);
  if (o.body) names.add('content-length');
  if (o.uncompressed) names.add('accept-encoding');
  return names;
}

/**
 * Sends `req` on to `o.upstream` and relays the answer to `res`, for both proxies (the automation
 * route, `/auth`). What the upstream gets: the client's headers through the one header table
 * (upstream-headers.ts), then `Host` the upstream's, the gateway's own headers, `X-Request-Id`,
 * the body's framing and the gateway's trace headers; the body by the one body rule
 * (upstream.ts). What is kept whatever the proxy: a silent upstream is cut off after
 * `timeoutMs` (`UpstreamSilent`); a client that leaves has its request to the upstream closed
 * (nothing to answer, no failure); an upstream gone mid-answer ends the client's connection;
 * the span ends with the answer or the failure. Throws what Node throws for a header it refuses.
 */
export function forward(
  req: IncomingMessage,
  res: ServerResponse,
  o: Outbound,
  handlers: OutboundHandlers,
): void {
  const headers = upstreamRequestHeaders(req.rawHeaders, {
    keepCredentials: o.keepCredentials,
    replaced: replacedNames(o),
  });
  headers.push('host', o.upstream.host, ...o.headers);
  if (o.requestId !== undefined) headers.push('x-request-id', o.requestId);
  headers.push(...bodyFraming(req, o.body));
  if (o.trace) headers.push(...o.trace);

  const outgoing = o.upstream.request(req.method!, o.path, headers, o.timeoutMs);
  const { span } = o;
  let clientGone = false;
  outgoing.on('timeout', () => {
    outgoing.destroy(new UpstreamSilent(o.timeoutMs, outgoing.socket?.connecting === true));
  });
  outgoing.on('response', (answer) => {
    if (span) {
      span.setAttribute('http.response.status_code', answer.statusCode ?? 0);
      answer.once('close', () => endSpan(span));
    }
    // The upstream gone mid-answer: the client's connection ends too.
    answer.on('error', () => res.destroy());
    if (handlers.answered) handlers.answered(answer, outgoing);
    else relay(answer, res, o.requestId);
  });
  outgoing.on('error', (err) => {
    if (span?.isRecording()) endSpan(span, err);
    // Cut off because the client left: nobody to answer, and nothing wrong with the upstream.
    if (clientGone) return;
    const failure = handlers.failed(err);
    if (!failure) return;
    if (!res.headersSent && o.requestId !== undefined) res.setHeader('x-request-id', o.requestId);
    sendError(res, failure, o.logger);
  });
  // The client went away: so does its request to the upstream.
  res.once('close', () => {
    if (res.writableFinished || outgoing.destroyed) return;
    clientGone = true;
    outgoing.destroy();
  });
  sendBody(req, outgoing, o.body);
}

/**
 * The upstream's answer to the client as it came: its status, the headers the table lets back
 * (upstream-headers.ts) and `requestId` as `X-Request-Id`, then the body (`streamAnswer`).
 */
export function relay(answer: IncomingMessage, res: ServerResponse, requestId?: string): void {
  const headers = answerRawHeadersOf(answer);
  if (requestId !== undefined) headers.push('x-request-id', requestId);
  res.writeHead(answer.statusCode ?? 502, headers);
  streamAnswer(answer, res);
}

/**
 * Writes the answer's body to `res` chunk by chunk as it comes, and ends `res` with it. While
 * the client's connection is full the upstream's is paused, until it drains: nothing is held
 * beyond what Node's buffers hold. No `pipe` and its listeners per answer: its other duties are
 * `forward`'s (the client leaving closes the upstream request, the upstream leaving ends the
 * client's connection).
 */
export function streamAnswer(answer: IncomingMessage, res: ServerResponse): void {
  const resume = () => answer.resume();
  answer.on('data', (chunk: Buffer) => {
    if (!res.write(chunk)) {
      answer.pause();
      res.once('drain', resume);
    }
  });
  answer.on('end', () => res.end());
}
