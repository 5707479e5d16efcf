import { createServer, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { failure } from './envelope/envelope.ts';
import { sendError } from './envelope/error-handler.ts';
import { AppError, errorCodes, type ErrorCode } from './envelope/errors.ts';

/** Largest request head accepted; beyond it the client gets 431 in the envelope. */
export const MAX_HEADER_BYTES = 16 * 1024;

const REASONS: Partial<Record<number, string>> = {
  400: 'Bad Request',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};

/** Answers on a raw socket, for requests Node refuses before any handler sees them. */
function answerOnSocket(socket: Duplex, code: ErrorCode): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const { status, result, message } = errorCodes[code];
  const body = JSON.stringify(failure(result, message));
  socket.end(
    `HTTP/1.1 ${status} ${REASONS[status] ?? 'Error'}\r\n` +
      `Content-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

function clientErrorCode(err: NodeJS.ErrnoException): ErrorCode {
  if (err.code === 'HPE_HEADER_OVERFLOW') return 'headersTooLarge';
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return 'requestTimeout';
  return 'badRequestHeader';
}

/**
 * Starts one HTTP listener and resolves once it accepts connections. Node answers some requests
 * itself with a bare status line (an unparsable request, a missing Host, an `Expect` it does
 * not know, CONNECT); here each of them gets the envelope instead, so clients see one shape for
 * every error. (A missing Host is refused by the edge, which sees every request.)
 */
export async function listen(
  handler: RequestListener,
  host: string,
  port: number,
  logger: Logger,
): Promise<Server> {
  const server = createServer(
    { maxHeaderSize: MAX_HEADER_BYTES, requireHostHeader: false },
    handler,
  );
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 120_000;
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) =>
    answerOnSocket(socket, clientErrorCode(err)),
  );
  server.on('checkExpectation', (_req, res) => {
    res.setHeader('connection', 'close');
    sendError(res, new AppError('expectationFailed'), logger);
  });
  server.on('connect', (_req, socket: Duplex) => answerOnSocket(socket, 'methodNotAllowed'));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // `::` is Node's own default address: IPv6 and IPv4 on one socket, or IPv4 alone (0.0.0.0)
    // on a kernel without IPv6, where binding `::` itself would fail.
    server.listen(port, host === '::' ? undefined : host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

/**
 * Stops accepting connections and closes idle ones at once; requests in flight (forwarded ones
 * included) may finish within `graceMs`, then their connections are closed too. Resolves when
 * the server has no connection left.
 */
export async function closeServer(server: Server, graceMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  // A request that still arrives on a kept-alive connection is answered with `Connection: close`
  // (Node keeps such connections alive otherwise): the peer, a load balancer most often, stops
  // sending on it and Node closes it after the answer, instead of our closing it while the
  // peer's next request is on its way, which that peer would see as an empty answer (a 502).
  server.prependListener('request', (_req, res: ServerResponse) => {
    if (!res.headersSent) res.setHeader('connection', 'close');
  });
  server.closeIdleConnections();
  // A connection whose answer was in flight at the close goes idle after it: closed then.
  const idle = setInterval(() => server.closeIdleConnections(), 100);
  const force = setTimeout(() => server.closeAllConnections(), graceMs);
  await closed;
  clearInterval(idle);
  clearTimeout(force);
}
