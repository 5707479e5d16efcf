import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { Span } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { Dispatcher } from 'undici';
import { sendError } from '../envelope/error-handler.ts';
import { AppError } from '../envelope/errors.ts';
import { systemTimer, type StartTimer, type Timer } from '../time/timer.ts';
import { endSpan } from '../tracing/tracing.ts';
import {
  answerRawHeaders,
  answerRawHeadersOf,
  upstreamRequestHeaders,
} from './upstream-headers.ts';
import { proxyFailureCauseOf, type ProxyFailureCause } from './proxy-failures.ts';
import { bodyFraming, bodyOf, type Upstream } from './upstream.ts';

/** One request to send on: where, with what the gateway adds, and how long to wait. */
export interface Outbound {
  upstream: Upstream;
  /**
   * The client's address as the gateway vouches for it (edge/forwarding.ts): its requests in
   * flight to the upstream are bounded by its share of the pool (`Upstream.admit`).
   */
  client: string;
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
  /**
   * The body read whole (the form guard's, inflated if it came compressed): sent plain, with its
   * own length and no `Content-Encoding`.
   */
  body?: Buffer;
  /** The answer is asked for uncompressed (the client's `Accept-Encoding` dropped): a step reads it. */
  uncompressed?: boolean;
  /** How long the upstream may stay silent (connecting, or between bytes of its answer). */
  timeoutMs: number;
  /** The timer of that silence: the system's unless a test strikes its own. */
  startTimer?: StartTimer;
  /**
   * How long the upstream's answer may go on once it lasts (from its second chunk, an
   * informational head, or the first time it is held back), however steadily it comes: then
   * the client gets 504, or, its answer begun, its connection cut. Undefined: no bound but the
   * silence's.
   */
  answerDeadlineMs?: number;
  /** The timer of that deadline: the system's unless a test strikes its own. */
  startDeadline?: StartTimer;
  /**
   * Told why the exchange failed (the client gone is no failure), its answer begun or not, and
   * of a refusal over the pool share: the proxy's counter, made once per proxy.
   */
  countFailure?: (cause: ProxyFailureCause) => void;
  logger: Logger;
}

/**
 * The upstream's answer as a stream, for a proxy step that reads or changes it (`answered`):
 * its status and headers as Node names them on an `IncomingMessage` (`headers` by lowercase
 * name, `rawHeaders` as received). Read from, it reads on from the upstream; destroyed before
 * its end, it closes the request to the upstream.
 */
export class UpstreamAnswer extends Readable {
  readonly statusCode: number;
  readonly headers: IncomingHttpHeaders;
  readonly rawHeaders: string[];
  readonly #controller: Dispatcher.DispatchController;

  constructor(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
    rawHeaders: string[],
  ) {
    super();
    this.#controller = controller;
    this.statusCode = statusCode;
    this.headers = headers;
    this.rawHeaders = rawHeaders;
  }

  override _read(): void {
    this.#controller.resume();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    if (!this.readableEnded) this.#controller.abort(err ?? new Error('answer dropped unread'));
    callback(err);
  }
}

/**
 * The request's one timer of silence, for a step that works on the answer before relaying it:
 * `hold` stops it (Keycloak has answered; the gateway is the one busy), `restart` starts it
 * again.
 */
export interface SilenceTimer {
  hold(): void;
  restart(): void;
}

/** What a proxy does with the outcome, beyond what `forward` does for every one. */
export interface OutboundHandlers {
  /**
   * The upstream's answer began (its status known): a function that takes it as a stream
   * (`UpstreamAnswer`), or undefined to have it relayed as it came, each chunk written straight
   * to the client (`relay`'s result, without a stream).
   */
  answered?(status: number, timer: SilenceTimer): ((answer: UpstreamAnswer) => void) | undefined;
  /**
   * The upstream failed (refused, cut off, or silent: `UpstreamSilent`), and the client is still
   * there: the error it gets (or, its answer begun, whose connection is cut), or undefined when
   * the proxy took care of it (sent the request elsewhere).
   */
  failed(err: Error): AppError | undefined;
  /**
   * Writes the body of the 429 an address over its share of the pool gets (its status, the
   * request id and `Retry-After` already set), when not the envelope's `429-00002`: `/auth`'s
   * clients read Keycloak's errors. A function of the proxy's, not one made per request.
   */
  refuseOverShare?(res: ServerResponse): void;
}

/**
 * The upstream stayed silent for the request's timeout, or its answer went on past its deadline
 * (`pastDeadline`): 504 for the client.
 */
export class UpstreamSilent extends Error {
  /**
   * As a socket timeout is named, or the deadline, for the translations that read codes
   * (proxy-failures.ts `NETWORK_ERRORS`).
   */
  readonly code: 'ETIMEDOUT' | 'UPSTREAM_ANSWER_DEADLINE';
  /** Struck while the connection was being made: nothing was sent, safe to send elsewhere. */
  readonly beforeConnect: boolean;
  constructor(timeoutMs: number, beforeConnect: boolean, pastDeadline = false) {
    super(
      pastDeadline
        ? `the upstream's answer went on past its deadline of ${timeoutMs} ms`
        : `the upstream did not answer within ${timeoutMs} ms`,
    );
    this.code = pastDeadline ? 'UPSTREAM_ANSWER_DEADLINE' : 'ETIMEDOUT';
    this.beforeConnect = beforeConnect;
  }
}

/**
 * The upstream answered `100 Continue` or `101 Switching Protocols` though the gateway asked for
 * neither (it answers or drops the client's `Expect`, and drops `Upgrade` as hop-by-hop). RFC
 * 9110 lets a proxy drop such a 100 and relay the final answer, but undici refuses any 100, and
 * any upgrade it did not ask for, and closes the connection (nodejs/undici#197, not to be
 * supported); taking it would need a second HTTP parser between the socket and undici's on
 * every upstream connection. So the client gets 502 (a bad answer, not an unreachable upstream:
 * a Keycloak node stays in), and the log names this cause. Other informational answers (102,
 * 103) pass: the client gets the final answer alone.
 */
export class UpstreamUnaskedInterim extends Error {
  /** Read by the translations that read codes (keycloak-failures.ts): a bad answer. */
  readonly code = 'UPSTREAM_UNASKED_INTERIM';
  constructor(status: '100 Continue' | '101 Switching Protocols', cause: Error) {
    super(`the upstream answered ${status}, unasked; undici refuses it`, { cause });
  }
}

/** The client went away: the request to the upstream is closed for it, nobody to answer. */
class ClientLeft extends Error {}

const TRACE: ReadonlySet<string> = new Set(['traceparent', 'tracestate']);

/** The client's headers the gateway sets (or drops) itself for this request, beyond the table's. */
function replacedNames(o: Outbound): ReadonlySet<string> | undefined {
  if (o.body === undefined && o.uncompressed !== true) return o.trace ? TRACE : undefined;
  const names = new Set(o.trace ? TRACE : []);
  // A body read whole is plain: the form guard inflated a compressed one.
  if (o.body) names.add('content-length').add('content-encoding');
  if (o.uncompressed) names.add('accept-encoding');
  return names;
}

/**
 * Sends `req` on to `o.upstream` and relays the answer to `res`, for both proxies (the automation
 * route, `/auth`), through the upstream's undici pool (`dispatch`, `Exchange` below). What the
 * upstream gets: the client's headers through the one header table (upstream-headers.ts), then
 * `Host` the upstream's, the gateway's own headers, `X-Request-Id`, the length of a body read
 * whole and the gateway's trace headers; the body by the one body rule (upstream.ts). What is
 * kept whatever the proxy: a silent upstream is cut off after `timeoutMs` (`UpstreamSilent`),
 * and so is an answer still coming `answerDeadlineMs` after it began to last,
 * a client still sending the body it owes is waited for (the server's request timeout is its);
 * a client that leaves has its request to the upstream closed (nothing to answer, no failure);
 * an upstream gone mid-answer ends the client's connection; the span ends with the answer or
 * the failure; a client address holding its share of the upstream's pool while only the share
 * kept for others is free gets 429 with `Retry-After` (nothing sent; `429-00002` in the envelope
 * unless the proxy words it, `OutboundHandlers.refuseOverShare`), and a place
 * taken is given back when its answer ends.
 * Throws what undici throws for a header it refuses.
 */
export function forward(
  req: IncomingMessage,
  res: ServerResponse,
  o: Outbound,
  handlers: OutboundHandlers,
): void {
  // Gone before its turn (while admitted): nothing to send, no place to take.
  if (res.closed) {
    if (o.span?.isRecording()) endSpan(o.span, new ClientLeft('the client left'));
    return;
  }
  if (!o.upstream.admit(o.client)) {
    refuseOverShare(res, o, handlers);
    return;
  }
  const headers = upstreamRequestHeaders(req.rawHeaders, {
    keepCredentials: o.keepCredentials,
    replaced: replacedNames(o),
  });
  headers.push('host', o.upstream.host, ...o.headers);
  if (o.requestId !== undefined) headers.push('x-request-id', o.requestId);
  // undici frames a streamed body of unknown length itself (and refuses the header).
  if (o.body) headers.push(...bodyFraming(req, o.body));
  if (o.trace) headers.push(...o.trace);

  const body = bodyOf(req, o.body);
  // A body streamed as the client sends it: while the client still owes some and the upstream
  // has taken all it sent, the silence is the client's, bounded by the server's request
  // timeout (408), not the upstream's (504, a failure of the upstream's for the proxy).
  const clientOwes =
    body instanceof Readable
      ? () => !req.complete && req.readableLength === 0 && body.readableLength === 0
      : undefined;
  const exchange = new Exchange(res, o, handlers, clientOwes);
  // The client's place given back, and, gone before its answer ended, its request closed too.
  res.once('close', () => {
    o.upstream.release(o.client);
    if (!res.writableFinished) exchange.clientLeft();
    else if (!req.complete) dropRestOfBody(req);
  });
  exchange.dispatching = true;
  try {
    o.upstream.dispatcher.dispatch(
      {
        method: req.method!,
        path: o.upstream.basePath + o.path,
        headers,
        body,
      },
      exchange,
    );
  } finally {
    exchange.dispatching = false;
  }
}

/**
 * The client's answer is over while it still sends its body (the upstream answered without
 * reading it all, a 401 or 417 to a large upload, or failed): the rest is read and dropped, as
 * Node's server does for a handler that reads none. Left unread, it would hold the client's
 * upload, and its connection, until the server's request timeout: Node stops draining a request
 * once it was piped.
 */
function dropRestOfBody(req: IncomingMessage): void {
  req.unpipe();
  req.resume();
}

/**
 * The client's address holds its share of the pool: 429 (`429-00002` in the envelope, unless the
 * proxy words it: `refuseOverShare`), and it may try again in a second.
 */
function refuseOverShare(res: ServerResponse, o: Outbound, handlers: OutboundHandlers): void {
  o.countFailure?.('over_share');
  const refusal = new AppError('tooManyAtOnce');
  if (o.span?.isRecording()) endSpan(o.span, refusal);
  if (o.requestId !== undefined) res.setHeader('x-request-id', o.requestId);
  res.setHeader('retry-after', '1');
  if (handlers.refuseOverShare) handlers.refuseOverShare(res);
  else sendError(res, refusal, o.logger);
}

/**
 * One exchange with the upstream, as undici reports it (its `dispatch` handler): the answer's
 * status and headers written to the client as they come, then each chunk straight to
 * `res.write`; while the client's connection is full the upstream's is paused, until it drains
 * (nothing held beyond the sockets' buffers). One timer for the upstream's silence, started
 * again by every sign of life (a chunk of the request's body sent, the answer's head, a chunk of
 * it), and, once the answer lasts, one deadline of it, never started again; undici's own
 * timeouts are off.
 */
class Exchange implements Dispatcher.DispatchHandler {
  readonly #res: ServerResponse;
  readonly #o: Outbound;
  readonly #handlers: OutboundHandlers;
  readonly #timer: Timer;
  readonly #clientOwes: (() => boolean) | undefined;
  #controller: Dispatcher.DispatchController | undefined;
  /**
   * The answer's deadline: started once the answer lasts (a second chunk, an informational
   * head, the client or the reader holding it back), never for an answer that comes whole at
   * once (most do: its head, one chunk and its end in one read, where a timer would cost more
   * than the rest of the exchange).
   */
  #deadline: Timer | undefined;
  /** Why the gateway closed the exchange itself (silence, the client gone), when it did. */
  #cutOff: Error | undefined;
  #held = false;
  #settled = false;
  /** The answer's chunks so far. */
  #chunks = 0;
  #answer: UpstreamAnswer | undefined;
  #resume: (() => void) | undefined;
  /** Within `dispatch`: a failure now is undici refusing the request itself. */
  dispatching = false;

  constructor(
    res: ServerResponse,
    o: Outbound,
    handlers: OutboundHandlers,
    clientOwes: (() => boolean) | undefined,
  ) {
    this.#res = res;
    this.#o = o;
    this.#handlers = handlers;
    this.#clientOwes = clientOwes;
    this.#timer = (o.startTimer ?? systemTimer)(o.timeoutMs, () => this.#silent());
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.#controller = controller;
    // Cut off while it waited for its connection: it goes no further.
    if (this.#cutOff) controller.abort(this.#cutOff);
    else this.#alive();
  }

  onBodySent(): void {
    this.#alive();
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    this.#alive();
    // An informational answer (102 Processing, 103 Early Hints; undici refuses a 100 itself:
    // `UpstreamUnaskedInterim`) comes before the final one, which undici reports next: the
    // client gets that one alone, its head written once (a second head would throw and cut the
    // client off).
    if (statusCode < 200) {
      this.#startDeadline();
      return;
    }
    const { span } = this.#o;
    span?.setAttribute('http.response.status_code', statusCode);
    const raw = controller.rawHeaders as readonly (string | Buffer)[];
    const take = this.#handlers.answered?.(statusCode, this.#silenceTimer());
    if (take) {
      const answer = new UpstreamAnswer(controller, statusCode, headers, answerRawHeaders(raw));
      this.#answer = answer;
      if (span) answer.once('close', () => span.isRecording() && endSpan(span));
      // The upstream gone mid-answer: the client's connection ends too.
      answer.on('error', () => this.#res.destroy());
      take(answer);
      return;
    }
    const relayed = answerRawHeaders(raw);
    if (this.#o.requestId !== undefined) relayed.push('x-request-id', this.#o.requestId);
    this.#res.writeHead(statusCode, relayed);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#alive();
    if (this.#chunks++ > 0) this.#startDeadline();
    if (this.#answer) {
      if (!this.#answer.push(chunk)) {
        this.#startDeadline();
        controller.pause();
      }
      return;
    }
    if (!this.#res.write(chunk)) {
      this.#startDeadline();
      controller.pause();
      this.#res.once('drain', (this.#resume ??= () => controller.resume()));
    }
  }

  onResponseEnd(): void {
    this.#settle();
    if (this.#answer) {
      this.#answer.push(null);
      return;
    }
    this.#res.end();
    if (this.#o.span) endSpan(this.#o.span);
  }

  onResponseError(_controller: Dispatcher.DispatchController | null, error: Error): void {
    if (this.dispatching) {
      // Refused before anything was sent (a header undici will not write): thrown to the
      // caller, as each layer of undici hands it on.
      this.#settle();
      throw error;
    }
    if (this.#settled) return;
    this.#settle();
    const err = this.#cutOff ?? named(error, this.#o.timeoutMs);
    this.#o.countFailure?.(proxyFailureCauseOf(err));
    if (this.#answer) {
      // Its `error` ends the client's connection; its `close` the span.
      this.#answer.destroy(err);
      return;
    }
    this.#fail(err);
  }

  /** The client left: the exchange is closed, with nothing to answer and nothing wrong. */
  clientLeft(): void {
    if (this.#settled) return;
    this.#settle();
    this.#cutOff = new ClientLeft('the client left');
    const { span } = this.#o;
    if (span?.isRecording()) endSpan(span, this.#cutOff);
    this.#answer?.destroy();
    this.#controller?.abort(this.#cutOff);
  }

  #fail(err: Error): void {
    const { span } = this.#o;
    if (span?.isRecording()) endSpan(span, err);
    const res = this.#res;
    if (res.headersSent) {
      // The upstream gone mid-answer: the client's connection ends too.
      res.destroy();
      return;
    }
    const failure = this.#handlers.failed(err);
    if (!failure) return;
    if (this.#o.requestId !== undefined) res.setHeader('x-request-id', this.#o.requestId);
    sendError(res, failure, this.#o.logger);
  }

  /**
   * The upstream stayed silent: cut off, and the client told (504), its connection waiting or
   * not. Not while the client still owes the body the upstream waits for (`clientOwes`).
   */
  #silent(): void {
    if (this.#settled || this.#held) return;
    const beforeConnect = this.#controller === undefined;
    if (!beforeConnect && this.#clientOwes?.() === true) {
      // The client is the one silent: waited for (its leaving closes the exchange).
      this.#timer.refresh();
      return;
    }
    this.#cutOff = new UpstreamSilent(this.#o.timeoutMs, beforeConnect);
    if (!beforeConnect) {
      this.#controller!.abort(this.#cutOff);
      return;
    }
    // Still waiting for a connection: nothing was sent; it is aborted once it has one.
    this.#settle();
    this.#o.countFailure?.('timeout');
    this.#fail(this.#cutOff);
  }

  #startDeadline(): void {
    const deadlineMs = this.#o.answerDeadlineMs;
    if (deadlineMs === undefined || this.#deadline !== undefined || this.#settled) return;
    this.#deadline = (this.#o.startDeadline ?? systemTimer)(deadlineMs, () =>
      this.#pastDeadline(deadlineMs),
    );
  }

  /**
   * The answer still coming at its deadline (trickled, or read that slowly by the client): cut
   * off as the upstream's silence is, 504 when the client has nothing of it yet.
   */
  #pastDeadline(deadlineMs: number): void {
    if (this.#settled) return;
    this.#cutOff = new UpstreamSilent(deadlineMs, false, true);
    this.#controller!.abort(this.#cutOff);
  }

  #alive(): void {
    this.#timer.refresh();
  }

  #settle(): void {
    this.#settled = true;
    this.#timer.close();
    this.#deadline?.close();
  }

  #silenceTimer(): SilenceTimer {
    return {
      // Held, the timer may strike and be ignored; `refresh` starts it again either way.
      hold: () => {
        this.#held = true;
        this.#startDeadline();
      },
      restart: () => {
        this.#held = false;
        if (!this.#settled) this.#timer.refresh();
      },
    };
  }
}

/**
 * undici's failures that mean more than they say, named by what they mean: its connection
 * attempt given up (its `connectTimeout`, the request's timeout) is the upstream's silence while
 * connecting, as the gateway's own timer would have named it; the `bad response` and `bad
 * upgrade` it closes the connection with while a request of the gateway's runs are the
 * upstream's 100 Continue and 101 Switching Protocols (`UpstreamUnaskedInterim`; the only other
 * use of `bad response`, an answer with no request running, reaches no request).
 */
function named(error: Error, timeoutMs: number): Error {
  const { code } = error as { code?: unknown };
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return new UpstreamSilent(timeoutMs, true);
  if (code !== 'UND_ERR_SOCKET') return error;
  if (error.message === 'bad response') return new UpstreamUnaskedInterim('100 Continue', error);
  if (error.message === 'bad upgrade') {
    return new UpstreamUnaskedInterim('101 Switching Protocols', error);
  }
  return error;
}

/**
 * A step's answer (`UpstreamAnswer`) to the client as it came: its status, the headers the
 * table lets back (upstream-headers.ts) and `requestId` as `X-Request-Id`, then the body
 * (`streamAnswer`).
 */
export function relay(answer: UpstreamAnswer, res: ServerResponse, requestId?: string): void {
  const headers = answerRawHeadersOf(answer);
  if (requestId !== undefined) headers.push('x-request-id', requestId);
  res.writeHead(answer.statusCode, headers);
  streamAnswer(answer, res);
}

/**
 * Writes a step's answer's body to `res` chunk by chunk as it comes, and ends `res` with it.
 * While the client's connection is full the answer is paused, until it drains. No `pipe` and
 * its listeners per answer: its other duties are `forward`'s (the client leaving closes the
 * upstream request, the upstream leaving ends the client's connection).
 */
export function streamAnswer(answer: Readable, res: ServerResponse): void {
  const resume = () => answer.resume();
  answer.on('data', (chunk: Buffer) => {
    if (!res.write(chunk)) {
      answer.pause();
      res.once('drain', resume);
    }
  });
  answer.on('end', () => res.end());
}
