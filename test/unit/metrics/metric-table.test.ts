import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { CounterTable, HistogramTable } from '../../../src/metrics/metric-table.ts';

async function render(...tables: (CounterTable | HistogramTable)[]): Promise<string> {
  const registry = new Registry();
  for (const table of tables) registry.registerMetric(table.asPromMetric());
  return registry.metrics();
}

describe('CounterTable', () => {
  const labels = [
    { name: 'colour', values: ['red', 'green'] },
    { name: 'size', values: ['s', 'm', 'l'] },
  ];

  it('gives every combination of label values its own slot', () => {
    const table = new CounterTable({ name: 't_total', help: 'h', labels });
    const slots = new Set<number>();
    for (let a = 0; a < 2; a++) for (let b = 0; b < 3; b++) slots.add(table.slot(a, b));
    expect([...slots].sort()).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('renders counted slots with their labels, and none of the others', async () => {
    const table = new CounterTable({ name: 'things_total', help: 'Things.', labels });
    const greenL = table.slot(1, 2); // green, l
    table.inc(greenL);
    table.inc(greenL);
    table.inc(table.slot(0, 0));
    const text = await render(table);
    expect(text).toContain('# TYPE things_total counter');
    expect(text).toContain('things_total{colour="green",size="l"} 2');
    expect(text).toContain('things_total{colour="red",size="s"} 1');
    expect(text).not.toContain('size="m"');
  });

  it('renders zeros when asked, so a series exists before its first event', async () => {
    const table = new CounterTable({ name: 'z_total', help: 'h', labels, showZeros: true });
    const text = await render(table);
    expect(text.match(/^z_total\{/gm)).toHaveLength(6);
  });
});

describe('HistogramTable', () => {
  it('renders cumulative buckets, sum and count per slot', async () => {
    const table = new HistogramTable({
      name: 'latency_seconds',
      help: 'Latency.',
      labels: [{ name: 'route', values: ['a', 'b'] }],
      buckets: [0.1, 1],
    });
    table.observe(1, 0.05);
    table.observe(1, 0.1); // on a bound: `le` is inclusive
    table.observe(1, 0.5);
    table.observe(1, 7);
    const text = await render(table);
    expect(text).toContain('# TYPE latency_seconds histogram');
    expect(text).toContain('latency_seconds_bucket{route="b",le="0.1"} 2');
    expect(text).toContain('latency_seconds_bucket{route="b",le="1"} 3');
    expect(text).toContain('latency_seconds_bucket{route="b",le="+Inf"} 4');
    expect(text).toContain('latency_seconds_sum{route="b"} 7.65');
    expect(text).toContain('latency_seconds_count{route="b"} 4');
    expect(text).not.toContain('route="a"');
  });
});
