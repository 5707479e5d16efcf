import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { requestIdOf } from './request-id.ts';

/**
 * Gives a request its id (echoed as `X-Request-Id`) and logs one line when it ends: method,
 * path without query, status and duration. Headers are never logged: they carry credentials.
 */
export function beginAccessLog(req: IncomingMessage, res: ServerResponse, logger: Logger): void {
  const id = requestIdOf(req);
  res.setHeader('x-request-id', id);
  logWhenFinished(req, res, id, logger);
}

/**
 * The log line of `beginAccessLog`, for a caller that sends `X-Request-Id` itself: the
 * forwarded route writes it with the upstream's headers in one `writeHead`, because a header
 * set beforehand makes node build the response head the slow way.
 */
export function logWhenFinished(
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
  logger: Logger,
): void {
  const started = performance.now();
  // `on`, not `once`: a response finishes once, and `once` costs a wrapper and a removal.
  res.on('finish', () => {
    const status = res.statusCode;
    // Successful requests are the hot path: build the line only when it will be written.
    if (status < 400 && !logger.isLevelEnabled('debug')) return;
    const line = {
      reqId: id,
      method: req.method,
      // Express rewrites req.url inside mounted routers; originalUrl keeps what the client sent.
      path: ((req as { originalUrl?: string }).originalUrl ?? req.url ?? '').split('?', 1)[0],
      status,
      ms: Math.round((performance.now() - started) * 100) / 100,
    };
    if (status >= 500) logger.error(line, 'request failed');
    else if (status >= 400) logger.info(line, 'request refused');
    else logger.debug(line, 'request');
  });
}

/** `beginAccessLog` as express middleware. */
export function accessLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    beginAccessLog(req, res, logger);
    next();
  };
}
