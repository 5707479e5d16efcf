import type { MetricObjectWithValues, MetricValue } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../../src/metrics/metrics.ts';
import { createWorkerMetrics } from '../../../src/metrics/worker-metrics.ts';
import type { BuildInfo } from '../../../src/release/build-info.ts';

type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

const build: BuildInfo = { version: '1.2.3', revision: 'c0ffee1', nodeVersion: '24.21.0' };
const series = 'realmgate_build_info{version="1.2.3",revision="c0ffee1",node_version="24.21.0"} 1';

describe('realmgate_build_info', () => {
  it('is one series of value 1 naming the version, revision and Node', async () => {
    const metrics = createMetrics({ readiness: {}, build });
    const text = await metrics.registry!.metrics();
    expect(text).toContain('# TYPE realmgate_build_info gauge');
    expect(text.split('\n').filter((l) => l.startsWith('realmgate_build_info'))).toEqual([series]);
  });

  it('stays 1 across the workers of one gateway, not their sum', async () => {
    const workers = await Promise.all(
      ['1', '2'].map(
        async (worker) =>
          (await createMetrics({
            readiness: {},
            build,
            worker,
          }).registry!.getMetricsAsJSON()) as MetricsJson,
      ),
    );
    const text = await createWorkerMetrics().render(workers);
    expect(text.split('\n').filter((l) => l.startsWith('realmgate_build_info'))).toEqual([series]);
  });
});
