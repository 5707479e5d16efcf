import type { RequestHandler } from 'express';

/** What `/metrics` renders: a prom-client registry, or the aggregate of a gateway's workers. */
export interface Exposition {
  readonly contentType: string;
  metrics(): Promise<string>;
}

/** `GET /metrics`: every metric in Prometheus' text format. */
export function serveMetrics(registry: Exposition): RequestHandler {
  return async (_req, res, next) => {
    try {
      const body = await registry.metrics();
      // A scrape answered from a cache would repeat old counts as new ones.
      res.type(registry.contentType).set('cache-control', 'no-store').send(body);
    } catch (err) {
      next(err);
    }
  };
}
