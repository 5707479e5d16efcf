import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../../src/metrics/metrics.ts';
import { buildInfo } from '../../../src/release/build-info.ts';

/** Labels whose values are not a closed list the table can name (or that it sums up in words). */
const OPEN_LABELS = new Set([
  'le',
  'method',
  'status',
  'version',
  'revision',
  'node_version',
  'node',
]);
/** The duration's `route` takes the values the requests' row lists. */
const NAMED_IN = { realmgate_http_request_duration_seconds: 'realmgate_http_requests_total' };

describe('docs/operations.md metrics table', () => {
  it("names every value of every closed label, as an operator's alert rule needs it", async () => {
    const docs = await readFile(new URL('../../../docs/operations.md', import.meta.url), 'utf8');
    const metrics = createMetrics({ readiness: {}, build: buildInfo() });
    // Counters without zeros show a series once it counted: one request of each scheme.
    for (const authorization of [undefined, 'Basic x', 'Bearer x', 'DPoP x', 'Negotiate x']) {
      metrics.request('other', 'GET', 200, authorization, 0.001);
    }
    const families = await metrics.registry!.getMetricsAsJSON();
    const missing: string[] = [];
    for (const family of families.filter((f) => f.name.startsWith('realmgate_'))) {
      const named = NAMED_IN[family.name as keyof typeof NAMED_IN] ?? family.name;
      const row = docs.split('\n').find((line) => line.startsWith(`| \`${named}\``));
      expect(row, family.name).toBeDefined();
      for (const { labels } of family.values) {
        for (const [label, value] of Object.entries(labels)) {
          if (OPEN_LABELS.has(label) || row!.includes(`\`${value}\``)) continue;
          missing.push(`${family.name} ${label}=${value}`);
        }
      }
    }
    expect([...new Set(missing)]).toEqual([]);
  });
});
