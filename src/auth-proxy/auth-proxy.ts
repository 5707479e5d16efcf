import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { sendError } from '../envelope/error-handler.ts';
import { publicAddressHeaders, type Forwarding } from '../edge/forwarding.ts';
import { answerHeadersOf, upstreamRequestHeaders } from '../edge/upstream-headers.ts';
import { bodyFraming, createUpstream, hasBody, sendBody } from '../edge/upstream.ts';
import { traceHeadersNow } from '../tracing/trace-scope.ts';
import { AppError } from '../envelope/errors.ts';
import { bufferedBodyOf } from './form-body-guard.ts';
import {
  failedBeforeSending,
  failureOf,
  keycloakError,
  toKeycloakError,
} from '../keycloak/keycloak-failures.ts';
import type { KeycloakNode, KeycloakNodes } from '../keycloak/keycloak-nodes.ts';
import { appliesTo } from './auth-routes.ts';
import { rewriteConsolePage, rewriteLoginPage, type ListenerUrls } from './console-page.ts';
import { serveRewritten, type PageRewrite } from './rewrite-page.ts';
import { serveSmallAnswer } from './small-answer.ts';
import { mayRefuseCredentials, serveCredentialsRefusal } from './wrong-credentials.ts';

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
  forwarding: Forwarding;
  logger: Logger;
  /**
   * The admin listener's addresses: its console page gets the script that maps old console
   * addresses (`#/realms/master`) onto Keycloak 26's, and the console's login stays on the
   * admin listener (see console-page.ts). Unset on the public listener.
   */
  adminPages?: ListenerUrls;
}

/**
 * Proxies `/auth/...` to Keycloak unchanged (status, headers, body; only wrong credentials on
 * the password grant answer 401, as before Keycloak 26.6: wrong-credentials.ts), over the edge's
 * upstream client (edge/upstream.ts), as the automation forwarder does: the client's headers
 * through the edge's filter (credentials and cookies kept: Keycloak needs them), `Host` the node's,
 * `X-Forwarded-*` naming `PUBLIC_URL`, and the `X-Request-Id` the client gets back. A form body
 * the guard has read is sent as read, any other by the edge's one body rule. With several
 * nodes, each request goes to the next node that is up; one that could not connect (nothing sent) is sent
 * once more to another node that is up, when its body can be sent again (none, or the form the
 * guard read); any other failure takes the node out. Failures answer 503/504/502 through the
 * one translation of Keycloak failures (keycloak-failures.ts). Mount it at `/auth` before any
 * body parser but the form guard.
 */
export function createAuthProxy(options: AuthProxyOptions): RequestHandler {
  const { nodes, timeoutMs } = options;
  const several = nodes.all.length > 1;
  // Host, proto and port name the gateway's public address, never the caller's: they would let
  // a client choose the issuer Keycloak writes into tokens.
  const forwarded = publicAddressHeaders(options.publicUrl);
  const targets = nodes.all.map((node) => createUpstream(node.url, { maxSockets: 256 }));

  /** What Keycloak gets: the client's headers through the filter, then the gateway's own. */
  function headersFor(req: IncomingMessage, res: ServerResponse, host: string, body?: Buffer) {
    const rewrite = rewrites.has(req);
    const trace = traceHeadersNow();
    const kept = upstreamRequestHeaders(req.rawHeaders, { keepCredentials: true });
    const headers: string[] = [];
    for (let i = 0; i < kept.length; i += 2) {
      const name = kept[i]!.toLowerCase();
      // A form the guard read goes with its own length (below).
      if (name === 'content-length' && body) continue;
      // A page to rewrite is asked for uncompressed, so the gateway never inflates anything.
      if (name === 'accept-encoding' && rewrite) continue;
      // Traced: Keycloak's part is a child of the request's span (the client's is its parent).
      // Not traced: the client's traceparent passes on untouched.
      if ((name === 'traceparent' || name === 'tracestate') && trace) continue;
      headers.push(kept[i]!, kept[i + 1]!);
    }
    headers.push('host', host, ...forwarded);
    headers.push('x-forwarded-for', options.forwarding.forwarded(req).for);
    headers.push(...bodyFraming(req, body));
    const requestId = res.getHeader('x-request-id');
    if (typeof requestId === 'string') headers.push('x-request-id', requestId);
    if (trace) headers.push(...trace);
    return headers;
  }

  function send(req: IncomingMessage, res: ServerResponse, node: KeycloakNode, retried: boolean) {
    const target = targets[node.index]!;
    const body = bufferedBodyOf(req);
    const outgoing = target.request(
      req.method!,
      req.url ?? '/',
      headersFor(req, res, target.host, body),
      timeoutMs,
    );
    let cutOff: Error | undefined;
    let clientGone = false;
    outgoing.on('timeout', () => {
      cutOff = Object.assign(new Error(`Keycloak did not answer within ${timeoutMs} ms`), {
        code: 'ETIMEDOUT',
        // Nothing was sent yet: as safe to send elsewhere as a refused connection.
        beforeConnect: outgoing.socket?.connecting === true,
      });
      outgoing.destroy(cutOff);
    });
    outgoing.on('response', (answer) => {
      if (several) nodes.answered(node);
      // Keycloak gone mid-answer: the client's connection ends too.
      answer.on('error', () => res.destroy());
      const hook = answerHooks.get(req);
      if (hook) {
        // What the request ended is applied before its client learns it succeeded; the hook
        // never rejects (end-access.ts logs its failures), and the answer waits unread, or
        // read whole when the hook reads it. Keycloak has answered: its silence while the
        // hook runs is no timeout.
        const status = answer.statusCode ?? 502;
        const run = (body: Buffer | undefined) => {
          outgoing.setTimeout(0);
          return hook.run(status, body).then(() => outgoing.setTimeout(timeoutMs));
        };
        if (!hook.readsBody) {
          void run(undefined).then(() => relay(answer));
          return;
        }
        // An answer too large or compressed is relayed as it comes, and the hook not run.
        const headers = answerHeadersOf(answer);
        serveSmallAnswer(answer, res, { status, headers }, MAX_HOOKED_ANSWER_BYTES, (body) => {
          void run(body).then(() => res.writeHead(status, headers).end(body));
        });
        return;
      }
      relay(answer);
    });
    const relay = (answer: IncomingMessage) => {
      const rewrite = rewrites.get(req);
      if (rewrite) {
        serveRewritten(answer, res, rewrite);
        return;
      }
      if (mayRefuseCredentials(req, answer.statusCode ?? 502)) {
        serveCredentialsRefusal(answer, res);
        return;
      }
      res.writeHead(answer.statusCode ?? 502, answerHeadersOf(answer));
      answer.pipe(res);
    };
    outgoing.on('error', (err) => {
      // Cut off because the client left: nobody to answer, and nothing wrong with the node.
      if (clientGone) return;
      const failure = cutOff ? 'timeout' : failureOf(err);
      if (several && failure !== 'bad_answer') {
        nodes.failed(node, `/auth proxy: ${failure}`);
        const again = !retried && !res.headersSent && failedBeforeSending(err) && replayable(req);
        const next = again ? nodes.other(node) : undefined;
        if (next) {
          send(req, res, next, true);
          return;
        }
      }
      if (res.headersSent) res.destroy();
      else
        sendError(
          res,
          cutOff ? keycloakError('timeout', err) : toKeycloakError(err),
          options.logger,
        );
    });
    // The client went away: so does its request to Keycloak.
    res.once('close', () => {
      if (res.writableFinished || outgoing.destroyed) return;
      clientGone = true;
      outgoing.destroy();
    });
    sendBody(req, outgoing, body);
  }

  const rewrites = new WeakMap<IncomingMessage, PageRewrite>();
  const urls = options.adminPages;
  const consolePage = urls && rewriteConsolePage(urls);
  const loginPage = urls && rewriteLoginPage(urls);
  const pageRewriteOf = (req: IncomingMessage): PageRewrite | undefined => {
    if (!consolePage || !loginPage) return undefined;
    const { method } = req;
    if (method === 'GET' && appliesTo(req, 'consolePage')) return consolePage;
    if ((method === 'GET' || method === 'POST') && appliesTo(req, 'loginPage')) return loginPage;
    return undefined;
  };
  return (req, res) => {
    const rewrite = pageRewriteOf(req);
    if (rewrite) rewrites.set(req, rewrite);
    send(req, res, several ? nodes.pick() : nodes.all[0]!, false);
  };
}

interface AnswerHook {
  readsBody: boolean;
  run: (status: number, body: Buffer | undefined) => Promise<void>;
}

const answerHooks = new WeakMap<IncomingMessage, AnswerHook>();

/** Keycloak's answers a hook reads are a few bytes (RFC 7009's: none, or its error). */
const MAX_HOOKED_ANSWER_BYTES = 16 * 1024;

/**
 * Has `hook` run with the status of Keycloak's answer to `req` before the answer is relayed
 * (end-access.ts: what a logout ended is applied before its client hears of it), and with the
 * answer's body when `readsBody` (a plain body of at most 16 KiB; a larger or compressed one is
 * relayed without running `hook`). `hook` must not reject.
 */
export function beforeAnswer(
  req: IncomingMessage,
  hook: (status: number, body: Buffer | undefined) => Promise<void>,
  options: { readsBody?: boolean } = {},
) {
  answerHooks.set(req, { readsBody: options.readsBody === true, run: hook });
}

/** Whether the request's body can be sent again: none, or the form the guard has read. */
function replayable(req: IncomingMessage): boolean {
  return bufferedBodyOf(req) !== undefined || !hasBody(req);
}

/**
 * Unless `allowAdmin`, the admin console and admin REST API under `/auth/admin/` answer 404, as
 * they must on the public listener: every entry the edge matches there carries `adminListener`
 * (auth-routes.ts). The edge has already refused every path that could be read two ways (dot
 * segments, `//`, `;`, encoded separators) and matched the decoded segments, the `/auth/admin`
 * fallback in any case: `/auth/%61dmin/` and `/auth/ADMIN/` are `admin` here too.
 */
export function guardAuthPath(options: { allowAdmin: boolean }): RequestHandler {
  return (req, _res, next) => {
    if (!options.allowAdmin && appliesTo(req, 'adminListener')) {
      next(new AppError('notFound'));
      return;
    }
    next();
  };
}
