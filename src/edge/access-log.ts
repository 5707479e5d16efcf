import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';

/**
 * Logs one line for a request that ended: method, path without query, status and duration,
 * under the request id the edge gave it (edge/edge.ts); for one whose client left before its
 * whole answer (`client left`, at info), the status only if its head was sent. Headers are
 * never logged: they carry credentials.
 */
export function logFinished(
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
  seconds: number,
  logger: Logger,
): void {
  const status = res.statusCode;
  const answered = res.writableFinished;
  // Successful requests are the hot path: build the line only when it will be written.
  if (answered && status < 400 && !logger.isLevelEnabled('debug')) return;
  const line = {
    reqId: id,
    method: req.method,
    // Express rewrites req.url inside mounted routers; originalUrl keeps what the client sent.
    path: ((req as { originalUrl?: string }).originalUrl ?? req.url ?? '').split('?', 1)[0],
    // Before the head is sent, statusCode is Node's default 200, nothing anyone answered.
    status: answered || res.headersSent ? status : undefined,
    ms: Math.round(seconds * 100_000) / 100,
  };
  if (!answered) logger.info(line, 'client left');
  else if (status >= 500) logger.error(line, 'request failed');
  else if (status >= 400) logger.info(line, 'request refused');
  else logger.debug(line, 'request');
}
