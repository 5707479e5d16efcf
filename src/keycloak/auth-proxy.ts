import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Agent } from 'node:http';
import type { RequestHandler } from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import type { Logger } from 'pino';
import { sendError } from '../envelope/error-handler.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import { targetOf } from '../edge/request-scope.ts';
import { droppedRequestHeaderNames } from '../edge/upstream-headers.ts';
import { AppError } from '../envelope/errors.ts';
import { bufferedBodyOf } from './form-body-guard.ts';
import {
  failedBeforeSending,
  failureOf,
  keycloakError,
  toKeycloakError,
} from './keycloak-failures.ts';
import type { KeycloakNode, KeycloakNodes } from './keycloak-nodes.ts';
import {
  isConsolePage,
  isLoginPage,
  rewriteConsolePage,
  rewriteLoginPage,
  type ListenerUrls,
} from './console-page.ts';
import { serveRewritten, type PageRewrite } from './rewrite-page.ts';

export interface AuthProxyOptions {
  /**
   * Keycloak's nodes (base URLs including the relative path, e.g. `http://127.0.0.1:8080/auth`):
   * with several, each request goes to the next one that is up (see `nodeRouting`).
   */
  nodes: KeycloakNodes;
  /** The gateway's public address; Keycloak derives token `iss` from it. */
  publicUrl: string;
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
 * Proxies `/auth/...` to Keycloak unchanged (status, headers, body), with the client's headers
 * through the edge's filter (credentials and cookies kept: Keycloak needs them). Mount it at
 * `/auth` before any body parser so the form body streams through untouched.
 */
export function createAuthProxy(options: AuthProxyOptions): RequestHandler {
  const routing = nodeRouting(options.nodes);
  const publicUrl = new URL(options.publicUrl);
  const forwarded = {
    host: publicUrl.host,
    proto: publicUrl.protocol.replace(':', ''),
    port: publicUrl.port || (publicUrl.protocol === 'https:' ? '443' : '80'),
  };
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  // http-proxy answers a proxy timeout by aborting, which then surfaces as a reset: remember
  // which requests timed out, so they get 504 and not 503.
  const timedOut = new WeakSet<IncomingMessage>();
  const on = {
    proxyReq(proxyReq: ClientRequest, req: IncomingMessage) {
      proxyReq.once('timeout', () => timedOut.add(req));
      // Host, proto and port name the gateway's public address, never the caller's: they
      // would let a client choose the issuer Keycloak writes into tokens.
      proxyReq.setHeader('x-forwarded-host', forwarded.host);
      proxyReq.setHeader('x-forwarded-proto', forwarded.proto);
      proxyReq.setHeader('x-forwarded-port', forwarded.port);
      const [, forwardedFor] = options.forwarding.forwardedHeaders(req);
      proxyReq.setHeader('x-forwarded-for', forwardedFor!);
      // A form body already read by the guard is written here; the piped stream is empty.
      const body = bufferedBodyOf(req);
      if (body) {
        proxyReq.setHeader('content-length', body.length);
        proxyReq.write(body);
      }
    },
    // With several nodes, an answer puts its node back (with one, nothing to note).
    ...(routing && {
      proxyRes(_proxyRes: IncomingMessage, req: IncomingMessage) {
        routing.answered(req);
      },
    }),
    error(err: Error, req: IncomingMessage, res: ServerResponse | Socket) {
      if (routing && 'setHeader' in res && routing.retry(err, req, res, timedOut.has(req))) return;
      // The one translation of Keycloak failures (keycloak-failures.ts), as for the gateway's
      // own calls: unreachable 503, too slow 504, anything else 502.
      const error = timedOut.has(req) ? keycloakError('timeout', err) : toKeycloakError(err);
      if ('setHeader' in res) sendError(res, error, options.logger);
      else res.destroy();
    },
  };
  const settings = {
    target: options.nodes.all[0]!.url,
    router: routing?.route,
    changeOrigin: true,
    // Only the answer from Keycloak is timed here: the client's own socket is bounded by the
    // server's request timeouts, and a shorter one here would cut it off before the 504.
    proxyTimeout: options.timeoutMs,
    agent,
  };
  const proxy = createProxyMiddleware<IncomingMessage, ServerResponse>({ ...settings, on });
  // The pages rewritten are read whole (they are small) and asked for uncompressed, so the
  // gateway never inflates anything.
  const rewrites = new WeakMap<IncomingMessage, PageRewrite>();
  const pageProxy = createProxyMiddleware<IncomingMessage, ServerResponse>({
    ...settings,
    selfHandleResponse: true,
    on: {
      ...on,
      proxyRes(proxyRes, req, res) {
        routing?.answered(req);
        serveRewritten(proxyRes, res, rewrites.get(req)!);
      },
    },
  });
  const urls = options.adminPages;
  const consolePage = urls && rewriteConsolePage(urls);
  const loginPage = urls && rewriteLoginPage(urls);
  const pageRewriteOf = (req: IncomingMessage): PageRewrite | undefined => {
    if (!consolePage || !loginPage) return undefined;
    const { segments } = targetOf(req);
    if (req.method === 'GET' && isConsolePage(segments)) return consolePage;
    if ((req.method === 'GET' || req.method === 'POST') && isLoginPage(segments)) return loginPage;
    return undefined;
  };
  const handle: RequestHandler = (req, res, next) => {
    // Before the proxy copies them: http-proxy sends `Expect` on, and then skips its
    // `proxyReq` hook, which writes the body the form guard already read.
    for (const name of droppedRequestHeaderNames(req.rawHeaders, { keepCredentials: true })) {
      delete req.headers[name];
    }
    const rewrite = pageRewriteOf(req);
    if (rewrite) {
      delete req.headers['accept-encoding'];
      rewrites.set(req, rewrite);
      void pageProxy(req, res, next);
    } else void proxy(req, res, next);
  };
  routing?.resendWith((req, res) => {
    const send = rewrites.has(req) ? pageProxy : proxy;
    void send(req, res, (err?: unknown) => sendError(res, err, options.logger));
  });
  return handle;
}

/**
 * With several nodes: each request goes to the next node that is up. A request that could not
 * connect (nothing sent) is sent once more to another node that is up, when its body can be
 * sent again (none, or the form the guard buffered); any other failure takes the node out and
 * is translated as usual. Undefined with one node: its address is fixed, nothing to choose.
 */
function nodeRouting(nodes: KeycloakNodes) {
  if (nodes.all.length === 1) return undefined;
  const nodeOf = new WeakMap<IncomingMessage, KeycloakNode>();
  const resent = new WeakSet<IncomingMessage>();
  let resend: (req: IncomingMessage, res: ServerResponse) => void = () => undefined;
  return {
    route: (req: IncomingMessage): string => {
      const node = (resent.has(req) && nodeOf.get(req)) || nodes.pick();
      nodeOf.set(req, node);
      return node.url;
    },
    answered(req: IncomingMessage): void {
      const node = nodeOf.get(req);
      if (node) nodes.answered(node);
    },
    /** Takes the failed node out; true when the request went to another node instead. */
    retry(err: Error, req: IncomingMessage, res: ServerResponse, timedOut: boolean): boolean {
      const node = nodeOf.get(req);
      if (!node) return false;
      const failure = timedOut ? 'timeout' : failureOf(err);
      if (failure === 'bad_answer') return false;
      nodes.failed(node, `/auth proxy: ${failure}`);
      if (resent.has(req) || res.headersSent || !failedBeforeSending(err) || !replayable(req)) {
        return false;
      }
      const next = nodes.other(node);
      if (!next) return false;
      resent.add(req);
      nodeOf.set(req, next);
      resend(req, res);
      return true;
    },
    resendWith(send: (req: IncomingMessage, res: ServerResponse) => void): void {
      resend = send;
    },
  };
}

/** Whether the request's body can be sent again: none, or the form the guard has read. */
function replayable(req: IncomingMessage): boolean {
  if (bufferedBodyOf(req)) return true;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] === undefined && (!length || length === '0');
}

/**
 * Unless `allowAdmin`, the admin console and admin REST API under `/auth/admin/` answer 404, as
 * they must on the public listener. The edge has already refused every path that could be read
 * two ways (dot segments, `//`, `;`, encoded separators), and hands over the decoded segments:
 * `/auth/%61dmin/` and `/auth/ADMIN/` are `admin` here too.
 */
export function guardAuthPath(options: { allowAdmin: boolean }): RequestHandler {
  return (req, _res, next) => {
    const first = targetOf(req).segments[1] ?? '';
    if (!options.allowAdmin && first.toLowerCase() === 'admin') {
      next(new AppError('notFound'));
      return;
    }
    next();
  };
}
