import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { Forwarding } from '../edge/forwarding.ts';
import { AppError, errorCodes } from '../envelope/errors.ts';
import { keycloakClientHeaders, publicAddressHeaders } from '../outbound/forwarded-headers.ts';
import { forward, relay, type OutboundHandlers, type UpstreamAnswer } from '../outbound/forward.ts';
import { answerHeadersOf } from '../outbound/upstream-headers.ts';
import { createUpstream, hasBody } from '../outbound/upstream.ts';
import type { StartTimer } from '../time/timer.ts';
import { traceHeadersNow } from '../tracing/trace-scope.ts';
import { bufferedBodyOf } from './form-body-guard.ts';
import { sendTokenError, type Replacement } from './grant-answer.ts';
import { failedBeforeSending, failureOf, toKeycloakError } from '../keycloak/keycloak-failures.ts';
import type { KeycloakNode, KeycloakNodes } from '../keycloak/keycloak-nodes.ts';
import type { ProxyFailureCause, ProxyMetrics } from '../outbound/proxy-failures.ts';
import { serveHookedAnswer, type AnswerBody } from './hooked-answer.ts';

/** The connections to each Keycloak node, per worker, shared by every client (upstream.ts). */
export const KEYCLOAK_NODE_POOL = 256;

/**
 * An address over its share of a Keycloak node's pool (outbound/upstream.ts), as `/auth` answers
 * it: in OAuth's shape (RFC 6749 5.2), which Keycloak's clients read (the token endpoint's, its
 * introspection and revocation endpoints', its admin API's), as the form guard refuses a broken
 * form on any `/auth` path; `temporarily_unavailable` (OAuth's error for a server that cannot
 * take the request now) with the envelope's `429-00002` wording. `forward` sets `Retry-After`.
 * The API description documents the token endpoint's 429 from this.
 */
export const OVER_SHARE: Replacement = {
  status: 429,
  error: 'temporarily_unavailable',
  description: errorCodes.tooManyAtOnce.message,
};

const refuseOverShare = (res: ServerResponse) => sendTokenError(res, OVER_SHARE);

export interface AuthProxyOptions {
  /**
   * Keycloak's nodes (base URLs including the relative path, e.g. `http://127.0.0.1:8080/auth`):
   * with several, each request goes to the next one that is up.
   */
  nodes: KeycloakNodes;
  /** The gateway's public address; Keycloak derives token `iss` from it. */
  publicUrl: string;
  /** How long Keycloak may stay silent (connecting, or between bytes of its answer): then 504. */
  timeoutMs: number;
  /** The timer of that silence: the system's unless a test strikes its own. */
  startTimer?: StartTimer;
  /** How long an answer may go on once it lasts (outbound/forward.ts). */
  answerDeadlineMs: number;
  forwarding: Forwarding;
  /** Counts the failures (`upstream` `keycloak`). */
  metrics?: ProxyMetrics;
  logger: Logger;
}

/**
 * Proxies `/auth/...` to Keycloak unchanged (status, headers, body; only wrong credentials on
 * the password grant answer 401, as before Keycloak 26.6: wrong-credentials.ts), through the one
 * outbound `forward` (outbound/forward.ts), as the automation forwarder does: the client's
 * headers through the one header table (credentials and cookies kept: Keycloak needs them),
 * `X-Forwarded-*` naming `PUBLIC_URL` and the client address, the request's trace headers, and
 * the `X-Request-Id` the client gets back; a form body the guard has read is sent as read. What
 * is the proxy's own: with several nodes, each request goes to the next node that is up; one
 * that could not connect (nothing sent) is sent once more to another node that is up, when its
 * body can be sent again (none, or the form the guard read); any other failure takes the node
 * out, but a timeout only when the node does not answer its probe either. Failures answer
 * 503/504/502 through the one translation of Keycloak failures (keycloak-failures.ts). The
 * answer reaches the client as a step marked it (`beforeAnswer`, `relayAnswer`), else as it
 * came. Mount it at `/auth` before any body parser but the form guard.
 */
export function createAuthProxy(options: AuthProxyOptions): RequestHandler {
  const { nodes, timeoutMs, logger } = options;
  const several = nodes.all.length > 1;
  const { metrics } = options;
  const countFailure =
    metrics && ((cause: ProxyFailureCause) => metrics.proxyFailure('keycloak', cause));
  // Host, proto and port name the gateway's public address, never the caller's: they would let
  // a client choose the issuer Keycloak writes into tokens.
  const publicAddress = publicAddressHeaders(options.publicUrl);
  const targets = nodes.all.map((node) =>
    createUpstream(node.url, { maxSockets: KEYCLOAK_NODE_POOL, connectTimeoutMs: timeoutMs }),
  );

  function send(req: IncomingMessage, res: ServerResponse, node: KeycloakNode, retried: boolean) {
    const requestId = res.getHeader('x-request-id');
    const client = options.forwarding.clientAddress(req);
    const handlers: OutboundHandlers = {
      answered: (status, timer) => {
        if (several) nodes.answered(node);
        const hook = answerHooks.get(req);
        const step = answerRelayOf(req);
        // Neither a hook nor a step of its own: relayed as it came, with no stream.
        if (!hook && !step) return undefined;
        return (answer) => {
          if (!hook) {
            step!.relay(answer, res);
            return;
          }
          // What the request ended is applied before its client learns it succeeded; the hook
          // never rejects (end-access.ts logs its failures), and the answer waits unread, or
          // read as hooked-answer.ts reads it when the hook reads it. Keycloak has answered:
          // its silence while the hook runs is no timeout.
          const run = (body: AnswerBody | undefined) => {
            timer.hold();
            return hook.run(status, body).then(() => timer.restart());
          };
          if (!hook.readsBody) {
            void run(undefined).then(() => relayMarked(req, answer, res));
            return;
          }
          const head = { status, headers: answerHeadersOf(answer) };
          const reading = { holdBytes: MAX_HELD_ANSWER_BYTES, marker: hook.marker };
          serveHookedAnswer(answer, res, head, reading, run);
        };
      },
      failed: (err) => {
        const failure = failureOf(err);
        if (several && failure !== 'bad_answer') {
          nodes.callFailed(node, failure, '/auth proxy');
          const again = !retried && !res.headersSent && failedBeforeSending(err) && replayable(req);
          const next = again ? nodes.other(node) : undefined;
          if (next) {
            send(req, res, next, true);
            return undefined;
          }
        }
        return toKeycloakError(err);
      },
      refuseOverShare,
    };
    forward(
      req,
      res,
      {
        upstream: targets[node.index]!,
        client,
        path: req.url ?? '/',
        keepCredentials: true,
        headers: [...publicAddress, ...keycloakClientHeaders(client)],
        requestId: typeof requestId === 'string' ? requestId : undefined,
        // Traced: Keycloak's part is a child of the request's span (the client's is its parent).
        trace: traceHeadersNow(),
        body: bufferedBodyOf(req),
        // An answer a step reads is asked for uncompressed, so the gateway never inflates anything.
        uncompressed: answerRelayOf(req)?.uncompressed === true || readers.has(req),
        timeoutMs,
        answerDeadlineMs: options.answerDeadlineMs,
        ...(options.startTimer && { startTimer: options.startTimer }),
        countFailure,
        logger,
      },
      handlers,
    );
  }

  return (req, res) => {
    send(req, res, several ? nodes.pick() : nodes.all[0]!, false);
  };
}

/** Keycloak's answer to the client as the step that marked `req` relays it, else as it came. */
function relayMarked(req: IncomingMessage, answer: UpstreamAnswer, res: ServerResponse): void {
  const step = answerRelayOf(req);
  if (step) step.relay(answer, res);
  else relay(answer, res);
}

/** How a step has Keycloak's answer reach the client, when not as it came (see `relayAnswer`). */
export interface AnswerRelay {
  /** Sends `answer` to `res`: as it came, or read whole and changed. */
  relay(answer: UpstreamAnswer, res: ServerResponse): void;
  /** Keycloak is asked for an uncompressed answer, so that the gateway never inflates one. */
  uncompressed: boolean;
}

const relays = new WeakMap<IncomingMessage, AnswerRelay>();

/**
 * Has Keycloak's answer to `req` relayed by `relay` (after any `beforeAnswer` hook): a page the
 * admin listener rewrites (console-page.ts), a password grant's refusal read for its status
 * (wrong-credentials.ts). The step that applies decides; the proxy only reads the mark.
 */
export function relayAnswer(req: IncomingMessage, relay: AnswerRelay): void {
  relays.set(req, relay);
}

const readers = new WeakSet<IncomingMessage>();

/**
 * Has Keycloak's answer to `req` asked for uncompressed, for a step that reads it as the client
 * gets it (password-attempt-throttle.ts: whether a login page refused the password it posted).
 */
export function readsAnswer(req: IncomingMessage): void {
  readers.add(req);
}

/** The relay a step set for `req`, if any. */
export function answerRelayOf(req: IncomingMessage): AnswerRelay | undefined {
  return relays.get(req);
}

interface AnswerHook {
  readsBody: boolean;
  marker?: Buffer;
  run: (status: number, body: AnswerBody | undefined) => Promise<void>;
}

const answerHooks = new WeakMap<IncomingMessage, AnswerHook>();

/**
 * How much of an answer a hook reads is held, head included, until the hook is done: RFC 7009's
 * (none, or its error), a logout's page with Keycloak's theme (about 4 KiB). A larger one (a
 * realm's theme or display name can make a logout page any size) streams, its last chunk held
 * (hooked-answer.ts).
 */
const MAX_HELD_ANSWER_BYTES = 16 * 1024;

/**
 * Has `hook` run with the status of Keycloak's answer to `req` before the answer is relayed
 * (end-access.ts: what a logout ended is applied before its client hears of it), and when
 * `readsBody` with what its body holds (`AnswerBody`: its size, and whether `marker` occurs in
 * it), before the client has the whole of it, whatever its size. Such an answer is asked for
 * uncompressed as `readsAnswer` asks (a front compressing for a client that accepts it would
 * otherwise hide a success); a compressed one is relayed without running `hook`. `hook` must
 * not reject.
 */
export function beforeAnswer(
  req: IncomingMessage,
  hook: (status: number, body: AnswerBody | undefined) => Promise<void>,
  options: { readsBody?: boolean; marker?: Buffer } = {},
) {
  answerHooks.set(req, {
    readsBody: options.readsBody === true,
    ...(options.marker && { marker: options.marker }),
    run: hook,
  });
  if (options.readsBody === true) readsAnswer(req);
}

/** Whether the request's body can be sent again: none, or the form the guard has read. */
function replayable(req: IncomingMessage): boolean {
  return bufferedBodyOf(req) !== undefined || !hasBody(req);
}

/**
 * The public listener's step of the `/auth/admin` area: Keycloak's console and admin REST API
 * answer 404 there, as any unknown path. Every entry the edge matches there carries
 * `adminListener` (auth-routes.ts). The edge has already refused every path that could be read
 * two ways (dot segments, `//`, `;`, encoded separators) and matched the decoded segments, the
 * `/auth/admin` fallback in any case: `/auth/%61dmin/` and `/auth/ADMIN/` are `admin` here too.
 */
export const refuseAdminArea: RequestHandler = (_req, _res, next) => {
  next(new AppError('notFound'));
};
