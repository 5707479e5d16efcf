import {
  Agent,
  request as httpRequest,
  type ClientRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

/**
 * A server the gateway sends requests to (the automation service, one Keycloak node), read once
 * from its URL, with its own keep-alive pool, over plain `node:http`. undici's `Pool` was
 * measured as the forwarded route's client (bench/results.md): 0.83 × this used as fastify's
 * reply-from uses it; through its low-level `dispatch` with the answer written straight to the
 * client and all the route keeps, 1.18-1.30 × (2026-11-27), not adopted yet.
 */
export interface Upstream {
  /** Host and port as the URL names them: the `Host` the upstream gets. */
  readonly host: string;
  /** The URL's path without its trailing `/` (`/auth` for a Keycloak node): every path's prefix. */
  readonly basePath: string;
  /** Opens one request to `basePath + path`; silent for `timeoutMs`, it emits `timeout`. */
  request(
    method: string,
    path: string,
    headers: OutgoingHttpHeaders | readonly string[],
    timeoutMs: number,
  ): ClientRequest;
}

/**
 * The upstream at `url`. `maxSockets` bounds its pool; `socketTimeoutMs`, when set, closes a
 * kept-alive socket idle that long (equal to each request's timeout, a reused socket keeps its
 * timer instead of having it replaced on every request).
 */
export function createUpstream(
  url: string,
  pool: { maxSockets: number; socketTimeoutMs?: number },
): Upstream {
  const parsed = new URL(url);
  const secure = parsed.protocol === 'https:';
  const agentOptions = {
    keepAlive: true,
    maxSockets: pool.maxSockets,
    ...(pool.socketTimeoutMs !== undefined && { timeout: pool.socketTimeoutMs }),
  };
  const agent = secure ? new HttpsAgent(agentOptions) : new Agent(agentOptions);
  const send = secure ? httpsRequest : httpRequest;
  // `[::1]` names the host in a URL; the socket wants `::1`.
  const hostname = parsed.hostname.replace(/^\[|\]$/g, '');
  const port = parsed.port || (secure ? 443 : 80);
  const basePath = parsed.pathname.replace(/\/$/, '');
  return {
    host: parsed.host,
    basePath,
    request: (method, path, headers, timeoutMs) =>
      send({
        agent,
        hostname,
        port,
        method,
        path: basePath + path,
        // node writes a flat [name, value, ...] list as is (no setHeader per header).
        headers: headers as OutgoingHttpHeaders,
        timeout: timeoutMs,
      }),
  };
}

/**
 * Whether a request has content to send on (RFC 9112 6.3): a transfer coding, or a
 * `Content-Length` above 0. Without either the body is empty (`Content-Length: 0` included,
 * which travels on as a header with nothing to stream).
 */
export function hasBody(req: IncomingMessage): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const length = req.headers['content-length'];
  return length !== undefined && Number(length) !== 0;
}

const CHUNKED: readonly string[] = ['transfer-encoding', 'chunked'];
const NONE: readonly string[] = [];

/**
 * The header that frames the body the upstream gets, beside the client's headers (filtered:
 * `Content-Length` kept, `Transfer-Encoding` dropped as hop-by-hop): a body read whole
 * (`buffered`) goes with its own length, one of unknown length chunked again. Without it, node
 * would write a GET's or DELETE's streamed body unframed, for the upstream to read as the next
 * request on the connection.
 */
export function bodyFraming(req: IncomingMessage, buffered?: Buffer): readonly string[] {
  if (buffered) return ['content-length', String(buffered.length)];
  return req.headers['transfer-encoding'] !== undefined ? CHUNKED : NONE;
}

/** Sends the request's body on `outgoing` and ends it: `buffered` if read whole, else streamed. */
export function sendBody(req: IncomingMessage, outgoing: ClientRequest, buffered?: Buffer): void {
  if (buffered) outgoing.end(buffered);
  else if (hasBody(req)) req.pipe(outgoing);
  else outgoing.end();
}
