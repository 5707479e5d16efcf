import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { currentRequestId } from '../edge/request-context.ts';
import { errorChain } from '../outbound/proxy-failures.ts';
import { createUpstream } from '../outbound/upstream.ts';
import { traceHeadersNow } from '../tracing/trace-scope.ts';
import { unexpectedAnswer } from './keycloak-failures.ts';

/**
 * Hands over the outcome of one exchange: `err` (not yet translated) when there is no answer
 * the reader accepted, else the value read and the answer's HTTP status.
 */
export type ExchangeDone<T> = (err: unknown, value: T | undefined, status: number) => void;

/**
 * One HTTP exchange with one Keycloak node; see `createNodeExchange`. Returns `cutOff`, which
 * ends it unless it has ended, with the error `cause` makes: told whether nothing was sent yet
 * (still waiting for a place or for its connection), so that it may be tried elsewhere.
 */
export type NodeExchange = <T>(
  path: string,
  form: string | undefined,
  limits: ExchangeLimits,
  read: (status: number, body: string, contentType?: string) => T,
  done: ExchangeDone<T>,
  /** Headers the caller adds (a grant's `DPoP` proof). */
  extraHeaders?: Readonly<Record<string, string>>,
) => (cause: (beforeConnect: boolean) => Error) => void;

/** What bounds one exchange, and whose place it takes on the node (see `createPlaces`). */
export interface ExchangeLimits {
  maxBytes: number;
  /** From the call's start: its wait for a place counts. */
  timeoutMs: number;
  /** Set for a password grant: the realm it logs in to. */
  grantOf?: string;
}

/**
 * Connections kept to each Keycloak node. Background re-checks use at most 8 at once; with
 * `REVOCATION_CHECK_SECONDS=0` every request introspects and the rest wait for a place.
 */
const MAX_SOCKETS = 32;
/**
 * Of which password grants take at most 24: a grant may wait `AUTH_PROXY_TIMEOUT_MS` on a
 * Keycloak slow to hash passwords, and a burst of Basic logins would otherwise hold every
 * connection, leaving key-set fetches and introspections (bounded by `KEYCLOAK_TIMEOUT_MS`) to
 * time out behind them: every Bearer request of a realm whose keys are not known yet refused.
 */
const GRANT_PLACES = 24;
/**
 * The share of the grant places kept for realms holding less than it: an eighth (3), as the
 * /auth proxy keeps its pool's last eighth for addresses holding less (`Upstream.admit`). One
 * organization's fleet of cold logins does not queue every other organization's logins.
 */
const REALM_SHARE = Math.max(1, Math.floor(GRANT_PLACES / 8));

/**
 * Exchanges with the node at `nodeUrl` over the upstream's plain `node:http` keep-alive pool
 * (outbound/upstream.ts; the proxies use its undici pool, whose gain is in relaying answers
 * to clients, which these calls do not): measured
 * against the real Keycloak it costs the gateway less CPU per call than fetch (see the README's
 * performance notes). Each call first takes a place on the node (`createPlaces`), waiting for
 * one at most its `timeoutMs`; then a connection or answer idle for what is left of it is a
 * timeout. A timeout before the connection was made carries `beforeConnect` (nothing was
 * sent), as does a call that got no place (`foundNoPlace`). A call made for a request carries
 * its `X-Request-Id` (see edge/request-context.ts), and a traced one its `traceparent`.
 */
export function createNodeExchange(nodeUrl: string): NodeExchange {
  const node = createUpstream(nodeUrl, { maxSockets: MAX_SOCKETS });
  const places = createPlaces();

  return function exchange<T>(
    path: string,
    form: string | undefined,
    { maxBytes, timeoutMs, grantOf }: ExchangeLimits,
    read: (status: number, body: string, contentType?: string) => T,
    done: ExchangeDone<T>,
    extraHeaders?: Readonly<Record<string, string>>,
  ): (cause: (beforeConnect: boolean) => Error) => void {
    const started = performance.now();
    let settled = false;
    let current: ReturnType<typeof node.request> | undefined;
    const headers: OutgoingHttpHeaders =
      form === undefined
        ? { ...extraHeaders, accept: 'application/json' }
        : {
            ...extraHeaders,
            accept: 'application/json',
            'content-type': 'application/x-www-form-urlencoded',
            'content-length': Buffer.byteLength(form),
          };
    const requestId = currentRequestId();
    if (requestId !== undefined) headers['x-request-id'] = requestId;
    const trace = traceHeadersNow();
    for (let i = 0; trace && i < trace.length; i += 2) headers[trace[i]!] = trace[i + 1];
    // The place is given back as the exchange ends: its answer read, or its request destroyed.
    const settle = () => {
      settled = true;
      if (waiting.placed) places.give(grantOf);
      else places.leave(waiting);
      clearTimeout(queued);
    };
    const fail = (err: unknown) => {
      if (settled) return;
      settle();
      done(err, undefined, 0);
    };
    const send = (retried: boolean) => {
      // What is left of the call's time limit once it had its place (at least 1 ms).
      const left = Math.max(1, Math.ceil(timeoutMs - (performance.now() - started)));
      const req = node.request(form === undefined ? 'GET' : 'POST', path, headers, left);
      current = req;
      let answered = false;
      let cutOff: Error | undefined;
      req.on('timeout', () => {
        cutOff = timeoutError(timeoutMs, req.socket?.connecting === true);
        req.destroy(cutOff);
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        // A kept-alive connection the server closed just as we reused it: the request never
        // reached Keycloak, so once more on a fresh connection.
        const stale = err.code === 'ECONNRESET' || err.code === 'EPIPE';
        if (stale && !answered && !retried && req.reusedSocket) send(true);
        else fail(err);
      });
      req.on('response', (res) => {
        answered = true;
        readBody(res, maxBytes, (err, body) => {
          if (err) {
            req.destroy();
            fail(cutOff ?? err);
            return;
          }
          if (settled) return;
          const status = res.statusCode ?? 0;
          let value: T;
          try {
            value = read(status, body, res.headers['content-type']);
          } catch (readErr) {
            fail(readErr);
            return;
          }
          settle();
          done(undefined, value, status);
        });
      });
      req.end(form);
    };
    // A call that finds no place waits for one, within its time limit: nothing was sent.
    let queued: NodeJS.Timeout | undefined;
    const waiting: Waiting = {
      grantOf,
      placed: false,
      go() {
        clearTimeout(queued);
        // A request node refuses to make (a header it cannot send) ends this call only.
        try {
          send(false);
        } catch (err) {
          fail(err);
        }
      },
    };
    if (places.take(waiting)) waiting.go();
    else queued = setTimeout(() => fail(noPlaceError(timeoutMs)), timeoutMs);
    return (cause) => {
      if (settled) return;
      const socket = current?.socket;
      const err = cause(!socket || socket.connecting);
      fail(err);
      current?.destroy(err);
    };
  };
}

/** A call waiting for a place on a node; `go` sends it once `placed`. */
interface Waiting {
  readonly grantOf: string | undefined;
  placed: boolean;
  go(): void;
}

/**
 * The places of one node's connections, one per exchange from its start to its end. The node's
 * pool (`MAX_SOCKETS`) would queue a request past it without limit of time (a request's timeout
 * starts with its connection) and in arrival order; here a call waits within its own time limit,
 * and a grant takes one of `GRANT_PLACES` only: a realm may take any while more than
 * `REALM_SHARE` of them stay free, the last share kept for realms holding less. A call that
 * finds no place that it may take waits; as places are given back, the waiting calls that may
 * take one get it, in arrival order: a key-set fetch goes before the grants waiting before it.
 */
function createPlaces(): {
  /** Takes a place for `call` (true) or puts it in the line. */
  take(call: Waiting): boolean;
  /** `call` no longer waits (it timed out, or was cut off). */
  leave(call: Waiting): void;
  /** An exchange that held a place (a grant's, when `grantOf` is set) has ended. */
  give(grantOf: string | undefined): void;
} {
  let used = 0;
  let grants = 0;
  const grantsOf = new Map<string, number>();
  /** In arrival order (a Set keeps it, and drops one that leaves at once). */
  const line = new Set<Waiting>();
  const fits = (grantOf: string | undefined) => {
    if (used >= MAX_SOCKETS) return false;
    if (grantOf === undefined) return true;
    if (grants >= GRANT_PLACES) return false;
    return (grantsOf.get(grantOf) ?? 0) < REALM_SHARE || grants < GRANT_PLACES - REALM_SHARE;
  };
  const hold = (call: Waiting) => {
    call.placed = true;
    used += 1;
    if (call.grantOf === undefined) return;
    grants += 1;
    grantsOf.set(call.grantOf, (grantsOf.get(call.grantOf) ?? 0) + 1);
  };
  return {
    take(call) {
      // Whoever waits fits nowhere (each give hands out what fits): a call that fits now takes
      // a place no one waiting could take.
      if (!fits(call.grantOf)) {
        line.add(call);
        return false;
      }
      hold(call);
      return true;
    },
    leave(call) {
      line.delete(call);
    },
    give(grantOf) {
      used -= 1;
      if (grantOf !== undefined) {
        grants -= 1;
        const held = grantsOf.get(grantOf) ?? 0;
        if (held <= 1) grantsOf.delete(grantOf);
        else grantsOf.set(grantOf, held - 1);
      }
      for (const call of line) {
        if (used >= MAX_SOCKETS) break;
        if (!fits(call.grantOf)) continue;
        line.delete(call);
        hold(call);
        call.go();
      }
    },
  };
}

/**
 * A call that waited its whole time limit for a place on its node: nothing was sent, and the
 * node is not to blame (the gateway's own calls held its places). 504 all the same.
 */
function noPlaceError(timeoutMs: number): Error {
  return Object.assign(new Error(`no connection to Keycloak free within ${timeoutMs} ms`), {
    code: 'ETIMEDOUT',
    beforeConnect: true,
    noPlace: true,
  });
}

/** Whether `err` (or what it wraps) is a call that got no place (`noPlaceError`). */
export function foundNoPlace(err: unknown): boolean {
  for (const current of errorChain(err)) {
    if ((current as { noPlace?: unknown }).noPlace === true) return true;
  }
  return false;
}

export function timeoutError(timeoutMs: number, beforeConnect: boolean): Error {
  return Object.assign(new Error(`Keycloak did not answer within ${timeoutMs} ms`), {
    code: 'ETIMEDOUT',
    beforeConnect,
  });
}

/** The answer's body as text, refused (502) past `maxBytes`. */
function readBody(
  res: IncomingMessage,
  maxBytes: number,
  done: (err: Error | undefined, body: string) => void,
): void {
  const chunks: Buffer[] = [];
  let size = 0;
  res.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size > maxBytes) res.destroy(unexpectedAnswer('answer', res.statusCode ?? 0, 'too large'));
    else chunks.push(chunk);
  });
  res.on('error', (err) => done(err, ''));
  res.on('end', () =>
    done(
      undefined,
      chunks.length === 1 ? chunks[0]!.toString('utf8') : Buffer.concat(chunks).toString('utf8'),
    ),
  );
}
