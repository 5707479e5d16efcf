import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../../src/metrics/metrics.ts';
import { createWorkerMetrics } from '../../../src/metrics/worker-metrics.ts';

type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/** One worker's metrics after `requests` Bearer requests, Redis up or down. */
async function workerJson(worker: string, requests: number, cacheUp: boolean) {
  const metrics = createMetrics({
    readiness: { cache: () => (cacheUp ? Promise.resolve() : Promise.reject(new Error('down'))) },
    worker,
    build: { version: '1.2.3', revision: 'unknown', nodeVersion: '24.21.0' },
  });
  for (let i = 0; i < requests; i++) metrics.request('forwarded', 'GET', 200, 'Bearer x', 0.002);
  return (await metrics.registry!.getMetricsAsJSON()) as MetricsJson;
}

const valueOf = (text: string, series: string) =>
  Number(new RegExp(`^${series.replace(/[{}"\\]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1]);

describe('the metrics of a gateway with several workers', () => {
  it('sums counters and histograms, shows each worker, and is up only when every worker is', async () => {
    const metrics = createWorkerMetrics();
    metrics.restarted();
    const text = await metrics.render([
      await workerJson('1', 3, true),
      await workerJson('2', 2, false),
    ]);
    expect(
      valueOf(
        text,
        'realmgate_http_requests_total{route="forwarded",method="GET",status="2xx",auth="bearer"}',
      ),
    ).toBe(5);
    expect(valueOf(text, 'realmgate_http_request_duration_seconds_count{route="forwarded"}')).toBe(
      5,
    );
    expect(valueOf(text, 'realmgate_worker_requests_total{worker="1"}')).toBe(3);
    expect(valueOf(text, 'realmgate_worker_requests_total{worker="2"}')).toBe(2);
    expect(valueOf(text, 'realmgate_dependency_up{dependency="cache"}')).toBe(0);
    expect(valueOf(text, 'realmgate_worker_restarts_total')).toBe(1);
  });

  it('marks each worker up or down: down is a worker whose metrics are missing', async () => {
    const metrics = createWorkerMetrics();
    const text = await metrics.render([await workerJson('1', 1, true)], { 1: true, 2: false });
    expect(valueOf(text, 'realmgate_worker_up{worker="1"}')).toBe(1);
    expect(valueOf(text, 'realmgate_worker_up{worker="2"}')).toBe(0);
    expect(valueOf(text, 'realmgate_worker_requests_total{worker="1"}')).toBe(1);
  });
});
