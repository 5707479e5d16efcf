import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { chartWithVersion, ReleaseError } from '../../../scripts/release.ts';
import { VERSION } from '../../../src/release/version.ts';
import { chart, examples, ofKind, render, root } from '../../helpers/helm-chart.ts';

/*
 * The chart is versioned with the gateway (`npm run release` moves both), and its alert rules
 * are ops/prometheus/alerts.yml's: helm reads no file outside the chart, so the chart holds a
 * copy, which must stay the same file.
 */

const chartYaml = readFileSync(path.join(chart, 'Chart.yaml'), 'utf8');

describe('the chart', () => {
  it("has the release's version as its version and appVersion", () => {
    expect(parse(chartYaml)).toMatchObject({
      name: 'realmgate',
      version: VERSION,
      appVersion: VERSION,
    });
  });

  it('is moved to the next version by the release script, and nothing else in Chart.yaml', () => {
    const moved = chartWithVersion(chartYaml, '9.8.7');
    expect(parse(moved)).toEqual({ ...parse(chartYaml), version: '9.8.7', appVersion: '9.8.7' });
    expect(() => chartWithVersion('name: realmgate\n', '9.8.7')).toThrow(ReleaseError);
  });

  it('carries ops/prometheus/alerts.yml as it is (cp ops/prometheus/alerts.yml charts/realmgate/files/)', () => {
    expect(readFileSync(path.join(chart, 'files/alerts.yml'), 'utf8')).toBe(
      readFileSync(path.join(root, 'ops/prometheus/alerts.yml'), 'utf8'),
    );
  });

  it('renders those rules, templates and all, as the PrometheusRule', () => {
    const operators = examples.find((file) => file.endsWith('operators.yaml'))!;
    const [rule] = ofKind<{ spec: unknown }>(render([operators]), 'PrometheusRule');
    const alerts = parse(
      readFileSync(path.join(root, 'ops/prometheus/alerts.yml'), 'utf8'),
    ) as unknown;
    expect(rule!.spec).toEqual(alerts);
    expect(JSON.stringify(rule!.spec)).toContain('{{ $labels.instance }}');
  });
});
