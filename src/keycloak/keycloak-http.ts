import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import { currentRequestId } from '../edge/request-context.ts';
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
 * ends it with `err` unless it has ended.
 */
export type NodeExchange = <T>(
  path: string,
  form: string | undefined,
  limits: { maxBytes: number; timeoutMs: number },
  read: (status: number, body: string, contentType?: string) => T,
  done: ExchangeDone<T>,
  /** Headers the caller adds (a grant's `DPoP` proof). */
  extraHeaders?: Readonly<Record<string, string>>,
) => (err: Error) => void;

/**
 * Connections kept to each Keycloak node. Background re-checks use at most 8 at once; with
 * `REVOCATION_CHECK_SECONDS=0` every request introspects and the rest wait for a socket.
 */
const MAX_SOCKETS = 32;

/**
 * Exchanges with the node at `nodeUrl` over the upstream's plain `node:http` keep-alive pool
 * (outbound/upstream.ts; the proxies use its undici pool, whose gain is in relaying answers
 * to clients, which these calls do not): measured
 * against the real Keycloak it costs the gateway less CPU per call than fetch (see the README's
 * performance notes). A connection or answer idle for the call's `timeoutMs` is a timeout; a
 * timeout before the connection was made carries `beforeConnect` (nothing was sent). A call made for a request
 * carries its `X-Request-Id` (see edge/request-context.ts), and a traced one its `traceparent`.
 */
export function createNodeExchange(nodeUrl: string): NodeExchange {
  const node = createUpstream(nodeUrl, { maxSockets: MAX_SOCKETS });

  return function exchange<T>(
    path: string,
    form: string | undefined,
    { maxBytes, timeoutMs }: { maxBytes: number; timeoutMs: number },
    read: (status: number, body: string, contentType?: string) => T,
    done: ExchangeDone<T>,
    extraHeaders?: Readonly<Record<string, string>>,
  ): (err: Error) => void {
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
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      done(err, undefined, 0);
    };
    const send = (retried: boolean) => {
      const req = node.request(form === undefined ? 'GET' : 'POST', path, headers, timeoutMs);
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
          settled = true;
          done(undefined, value, status);
        });
      });
      req.end(form);
    };
    send(false);
    return (err) => {
      if (settled) return;
      fail(err);
      current?.destroy(err);
    };
  };
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
