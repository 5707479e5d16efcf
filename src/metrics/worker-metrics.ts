import {
  AggregatorRegistry,
  Counter,
  Gauge,
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
  /**
   * The Prometheus text of `workers` (each worker's `getMetricsAsJSON()`) and the primary's;
   * `up` says, by worker number, whether that worker's metrics are among them.
   */
  render(workers: MetricsJson[], up?: Readonly<Record<string, boolean>>): Promise<string>;
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
  const workerUp = new Gauge({
    name: 'realmgate_worker_up',
    help: 'Whether the worker answered for this scrape: 0 while it hangs or is starting again (its metrics are missing).',
    labelNames: ['worker'],
    registers: [registry],
  });
  return {
    contentType: registry.contentType,
    restarted: () => restarts.inc(),
    async render(workers, up = {}) {
      workerUp.reset();
      for (const [worker, answered] of Object.entries(up))
        workerUp.set({ worker }, answered ? 1 : 0);
      const own = (await registry.getMetricsAsJSON()) as MetricsJson;
      return AggregatorRegistry.aggregate([...workers, own]).metrics();
    },
  };
}
