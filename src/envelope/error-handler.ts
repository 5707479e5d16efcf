import type { ServerResponse } from 'node:http';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import type { Logger } from 'pino';
import { isDatabaseUnavailable } from '../db/database-failures.ts';
import { AppError } from './errors.ts';
import { failure } from './envelope.ts';

/** Answers routes nobody claimed with 404 in the envelope. */
export const notFoundHandler: RequestHandler = (_req, _res, next) => {
  next(new AppError('notFound'));
};

/**
 * Maps errors thrown by express itself (body parser, etc.) onto our codes: what the client is
 * answered (and what the audit log records of a refusal).
 */
export function toAppError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  const status = (err as { status?: unknown; statusCode?: unknown }).status;
  const type = (err as { type?: unknown }).type;
  if (type === 'entity.too.large' || status === 413) {
    return new AppError('payloadTooLarge', { cause: err });
  }
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return new AppError('badRequestBody', { cause: err });
  }
  if (isDatabaseUnavailable(err)) return new AppError('databaseUnavailable', { cause: err });
  return new AppError('unexpected', { cause: err });
}

/**
 * The one place that turns an error into a response, for express routes and the raw
 * forwarding route alike. 5xx bodies stay generic; the cause goes to the log only.
 */
export function sendError(res: ServerResponse, err: unknown, logger: Logger): void {
  const error = toAppError(err);
  if (error.status >= 500) {
    logger.error(
      { err: error.cause ?? error, result: error.result, reqId: res.getHeader('x-request-id') },
      error.message,
    );
  }
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify(failure(error.result, error.message, error.data));
  res.statusCode = error.status;
  for (const [name, value] of Object.entries(error.headers)) res.setHeader(name, value);
  // 503 means "retry later": say when, so clients can tell it from "you are wrong"; an error
  // that knows its wait (the login throttle's) keeps it, as its message names it.
  if (error.status === 503 && !res.hasHeader('retry-after')) res.setHeader('retry-after', '5');
  // A refusal is about this request and these credentials: nobody keeps it for another.
  res.setHeader('cache-control', 'no-store');
  res.setHeader('content-type', 'application/json; charset=utf-8');
  res.setHeader('content-length', Buffer.byteLength(body));
  res.end(body);
}

/** The express error handler: every route error goes through `sendError`. */
export function createErrorHandler(logger: Logger): ErrorRequestHandler {
  return (err: unknown, _req, res, _next) => sendError(res, err, logger);
}
