import {
  AggregatorRegistry,
  Counter,
  Registry,
  type MetricObjectWithValues,
  type MetricValue,
} from 'prom-client';

type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/**
 * The supervising process's own metrics (worker restarts) and the one exposition of a gateway
 * that runs several workers: every worker's metrics, aggregated as each metric says (counters
 * and histograms summed, the dependency gauges at their minimum, see metrics.ts), and these.
 */
export interface WorkerMetrics {
  /** A worker died and is started again. */
  restarted(): void;
  /** The Prometheus text of `workers` (each worker's `getMetricsAsJSON()`) and the primary's. */
  render(workers: MetricsJson[]): Promise<string>;
  readonly contentType: string;
}

/** Creates the primary's metrics. */
export function createWorkerMetrics(): WorkerMetrics {
  const registry = new Registry();
  const restarts = new Counter({
    name: 'realmgate_worker_restarts_total',
    help: 'Worker processes that died and were started again by the supervising process.',
    registers: [registry],
  });
  return {
    contentType: registry.contentType,
    restarted: () => restarts.inc(),
    async render(workers) {
      const own = (await registry.getMetricsAsJSON()) as MetricsJson;
      return AggregatorRegistry.aggregate([...workers, own]).metrics();
    },
  };
}
