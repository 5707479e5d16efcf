import type { RequestHandler } from 'express';
import type { Registry } from 'prom-client';

/** `GET /metrics`: every metric in Prometheus' text format. */
export function serveMetrics(registry: Registry): RequestHandler {
  return async (_req, res, next) => {
    try {
      const body = await registry.metrics();
      res.type(registry.contentType).send(body);
    } catch (err) {
      next(err);
    }
  };
}
