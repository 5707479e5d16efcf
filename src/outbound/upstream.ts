import {
  Agent,
  request as httpRequest,
  type ClientRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { PassThrough, type Readable } from 'node:stream';
import { Pool, type Dispatcher } from 'undici';
import { addressGroupOf } from '../edge/address-group.ts';

/**
 * A server the gateway sends requests to (the automation service, one Keycloak node), read once
 * from its URL, with two keep-alive pools made when first used: the proxies' undici `Pool`
 * (`dispatcher`, through its low-level `dispatch`: outbound/forward.ts; measured against
 * `node:http` in bench/results.md), and plain `node:http` (`request`) for the gateway's own
 * calls to Keycloak (keycloak/keycloak-http.ts).
 */
export interface Upstream {
  /** Host and port as the URL names them: the `Host` the upstream gets. */
  readonly host: string;
  /** The URL's path without its trailing `/` (`/auth` for a Keycloak node): every path's prefix. */
  readonly basePath: string;
  /**
   * The proxies' pool (outbound/forward.ts: paths given whole, `basePath` included): undici's
   * own headers and body timeouts off (the caller keeps one timer of silence a request, and one
   * deadline of its answer); a connection attempt gives up after `connectTimeoutMs`, as the
   * caller's timer would.
   */
  readonly dispatcher: Dispatcher;
  /**
   * Takes a place in the pool for one request of `client` (its address as the gateway vouches
   * for it; counted by its group, edge/address-group.ts: an IPv6 host by its /64). An address
   * may take any place while more than a share of the pool (an eighth, at least one) stays free;
   * the last share is kept for addresses holding less than a share.
   * So a burst from one host (a fleet's jobs starting together) is served while the pool has
   * room, and one address's slow clients (a body trickled, an answer read slowly) never hold
   * every connection and leave the others waiting: false when `client` holds its share and
   * only the kept share is free. Each place taken is given back once (`release`).
   */
  admit(client: string): boolean;
  release(client: string): void;
  /** Opens one request to `basePath + path`; silent for `timeoutMs`, it emits `timeout`. */
  request(
    method: string,
    path: string,
    headers: OutgoingHttpHeaders | readonly string[],
    timeoutMs: number,
  ): ClientRequest;
}

/** The share of a pool kept for addresses holding less than it: an eighth (`Upstream.admit`). */
const CLIENT_SHARE = 8;

/**
 * The upstream at `url`. `maxSockets` bounds each pool (and the proxies' pool keeps its last
 * eighth for addresses holding less than an eighth); `socketTimeoutMs`, when set, closes a
 * kept-alive `node:http` socket idle that long (equal to each request's timeout, a reused socket
 * keeps its timer instead of having it replaced on every request); `connectTimeoutMs` bounds a
 * connection attempt of the undici pool (default: `socketTimeoutMs`, else undici's 10 s). The
 * undici pool keeps an idle connection as undici does (4 s, or less when the upstream's
 * `Keep-Alive` says so), shorter than Node's and most servers' own idle limits.
 */
export function createUpstream(
  url: string,
  pool: { maxSockets: number; socketTimeoutMs?: number; connectTimeoutMs?: number },
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
  const connectTimeout = pool.connectTimeoutMs ?? pool.socketTimeoutMs;
  let dispatcher: Dispatcher | undefined;
  const share = Math.max(1, Math.floor(pool.maxSockets / CLIENT_SHARE));
  const inFlight = new Map<string, number>();
  let total = 0;
  return {
    host: parsed.host,
    basePath,
    get dispatcher() {
      dispatcher ??= new Pool(parsed.origin, {
        connections: pool.maxSockets,
        headersTimeout: 0,
        bodyTimeout: 0,
        ...(connectTimeout !== undefined && { connectTimeout }),
      });
      return dispatcher;
    },
    admit(client) {
      const group = addressGroupOf(client);
      const held = inFlight.get(group) ?? 0;
      if (held >= share && total >= pool.maxSockets - share) return false;
      inFlight.set(group, held + 1);
      total += 1;
      return true;
    },
    release(client) {
      const group = addressGroupOf(client);
      const held = inFlight.get(group) ?? 0;
      if (held === 0) return;
      if (held === 1) inFlight.delete(group);
      else inFlight.set(group, held - 1);
      total -= 1;
    },
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
 * (`buffered`) goes with its own length, one of unknown length chunked again. undici frames a
 * streamed body of unknown length itself (and refuses a `Transfer-Encoding` header): the
 * proxies send `bodyOf`'s body with only the length of one read whole.
 */
export function bodyFraming(req: IncomingMessage, buffered?: Buffer): readonly string[] {
  if (buffered) return ['content-length', String(buffered.length)];
  return req.headers['transfer-encoding'] !== undefined ? CHUNKED : NONE;
}

/**
 * The body the upstream gets through undici: `buffered` if read whole, else the request's body
 * streamed through a stream of its own (undici destroys the body it sent when the exchange
 * fails, and destroying the client's request would cut the client off before its 502/504), or
 * none.
 */
export function bodyOf(req: IncomingMessage, buffered?: Buffer): Buffer | Readable | null {
  if (buffered) return buffered;
  return hasBody(req) ? req.pipe(new PassThrough()) : null;
}
