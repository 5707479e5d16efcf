import { createServer, type RequestListener, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { failure } from './envelope/envelope.ts';
import { errorCodes } from './envelope/errors.ts';

/** Largest request head accepted; beyond it the client gets 431 in the envelope. */
export const MAX_HEADER_BYTES = 16 * 1024;

/**
 * Node answers unparsable requests itself with a bare status line; we answer them in the
 * envelope instead, so clients see the same shape for every error.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const overflow = err.code === 'HPE_HEADER_OVERFLOW';
  const { status, result, message } = overflow
    ? errorCodes.headersTooLarge
    : errorCodes.badRequestHeader;
  const body = JSON.stringify(failure(result, message));
  const reason = overflow ? 'Request Header Fields Too Large' : 'Bad Request';
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** Starts one HTTP listener and resolves once it accepts connections. */
export async function listen(
  handler: RequestListener,
  host: string,
  port: number,
): Promise<Server> {
  const server = createServer({ maxHeaderSize: MAX_HEADER_BYTES }, handler);
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 120_000;
  server.on('clientError', answerClientError);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

/** Stops accepting connections and closes idle ones; resolves when all requests are done. */
export async function closeServer(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const force = setTimeout(() => server.closeAllConnections(), 10_000);
  await closed;
  clearTimeout(force);
}
