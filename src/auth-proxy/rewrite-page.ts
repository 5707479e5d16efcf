import type { ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import { relayAnswer, type AnswerRelay } from './auth-proxy.ts';
import { streamAnswer, type UpstreamAnswer } from '../outbound/forward.ts';
import { answerHeadersOf } from '../outbound/upstream-headers.ts';
import { serveSmallAnswer } from './small-answer.ts';

/** The pages the admin listener rewrites are a few KiB; anything far larger is passed on. */
export const REWRITE_MAX_BYTES = 256 * 1024;

/** A page's Content-Security-Policy headers, each header value one entry. */
export interface PageCsp {
  enforced: string[];
  reportOnly: string[];
}

/** A change to one HTML page; undefined leaves the page exactly as Keycloak sent it. */
export type PageRewrite = (
  html: string,
  csp: PageCsp,
) => { html: string; csp: PageCsp } | undefined;

const utf8 = new TextDecoder('utf-8', { fatal: true });

function listOf(value: string | string[] | undefined): string[] {
  return value === undefined ? [] : Array.isArray(value) ? value : [value];
}

/**
 * Answers from Keycloak's answer `proxyRes`, applying `rewrite` to a plain (uncompressed) 200
 * HTML page of at most {@link REWRITE_MAX_BYTES}, read whole. Anything else (another status or
 * type, a compressed or larger body, invalid UTF-8, a page the rewrite declines) passes through
 * byte for byte.
 */
export function serveRewritten(
  proxyRes: UpstreamAnswer,
  res: ServerResponse,
  rewrite: PageRewrite,
): void {
  const headers = answerHeadersOf(proxyRes);
  const status = proxyRes.statusCode;
  // Keycloak gone mid-page: the client's connection ends too, as a piped answer's would.
  proxyRes.on('error', () => res.destroy());
  if (status !== 200 || !/^text\/html\b/i.test(String(proxyRes.headers['content-type'] ?? ''))) {
    res.writeHead(status, headers);
    streamAnswer(proxyRes, res);
    return;
  }
  serveSmallAnswer(proxyRes, res, { status, headers }, REWRITE_MAX_BYTES, (body) => {
    const page = rewritten(body, proxyRes, rewrite);
    if (page) {
      if (page.csp.enforced.length > 0) {
        headers['content-security-policy'] = page.csp.enforced.join(', ');
      }
      if (page.csp.reportOnly.length > 0) {
        headers['content-security-policy-report-only'] = page.csp.reportOnly.join(', ');
      }
      headers['content-length'] = page.body.length;
    }
    res.writeHead(status, headers);
    res.end(page ? page.body : body);
  });
}

function rewritten(
  body: Buffer,
  proxyRes: UpstreamAnswer,
  rewrite: PageRewrite,
): { body: Buffer; csp: PageCsp } | undefined {
  let html: string;
  try {
    html = utf8.decode(body);
  } catch {
    return undefined;
  }
  const page = rewrite(html, {
    enforced: listOf(proxyRes.headers['content-security-policy']),
    reportOnly: listOf(proxyRes.headers['content-security-policy-report-only']),
  });
  return page && { body: Buffer.from(page.html, 'utf8'), csp: page.csp };
}

/**
 * The `/auth` step of a page the admin listener rewrites: Keycloak's answer to a request of one
 * of `methods` is served through `rewrite` (asked for uncompressed); any other passes on.
 */
export function rewritePages(methods: readonly string[], rewrite: PageRewrite): RequestHandler {
  const relay: AnswerRelay = {
    uncompressed: true,
    relay: (answer, res) => serveRewritten(answer, res, rewrite),
  };
  return (req, _res, next) => {
    if (methods.includes(req.method)) relayAnswer(req, relay);
    next();
  };
}
