import type { ClientRequest, IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Agent } from 'node:http';
import type { RequestHandler } from 'express';
import { createProxyMiddleware } from 'http-proxy-middleware';
import type { Logger } from 'pino';
import { sendError } from '../envelope/error-handler.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import { targetOf } from '../edge/request-target.ts';
import { droppedRequestHeaderNames } from '../edge/upstream-headers.ts';
import { AppError } from '../envelope/errors.ts';
import { bufferedBodyOf } from './form-body-guard.ts';
import { keycloakError, toKeycloakError } from './keycloak-failures.ts';
import {
  isConsolePage,
  isLoginPage,
  rewriteConsolePage,
  rewriteLoginPage,
  type ListenerUrls,
} from './console-page.ts';
import { serveRewritten, type PageRewrite } from './rewrite-page.ts';

export interface AuthProxyOptions {
  /** Keycloak base URL including its relative path, e.g. `http://127.0.0.1:8080/auth`. */
  keycloakUrl: string;
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
    error(err: Error, req: IncomingMessage, res: ServerResponse | Socket) {
      // The one translation of Keycloak failures (keycloak-failures.ts), as for the gateway's
      // own calls: unreachable 503, too slow 504, anything else 502.
      const error = timedOut.has(req) ? keycloakError('timeout', err) : toKeycloakError(err);
      if ('setHeader' in res) sendError(res, error, options.logger);
      else res.destroy();
    },
  };
  const settings = {
    target: options.keycloakUrl,
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
  return (req, res, next) => {
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
