import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import { requestIdOf } from './request-id.ts';

/**
 * Gives each request an id (echoed as `X-Request-Id`) and logs one line when it ends: method,
 * path without query, status and duration. Headers are never logged: they carry credentials.
 */
export function accessLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const id = requestIdOf(req);
    const started = process.hrtime.bigint();
    res.setHeader('x-request-id', id);
    res.locals.requestId = id;
    res.once('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const line = {
        reqId: id,
        method: req.method,
        path: req.originalUrl.split('?', 1)[0],
        status: res.statusCode,
        ms: Math.round(ms * 100) / 100,
      };
      if (res.statusCode >= 500) logger.error(line, 'request failed');
      else if (res.statusCode >= 400) logger.info(line, 'request refused');
      else logger.debug(line, 'request');
    });
    next();
  };
}
