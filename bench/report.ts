import { mkdir, writeFile } from 'node:fs/promises';
import type { PairOutcome } from './pairs.ts';
import type { Scenario } from './scenarios.ts';
import { median } from './stats.ts';

export type Row = ReturnType<typeof rowsOf>[number];
export type Target = { target: string; measured: string; met: boolean | undefined };
type Report = { rows: Row[]; targets: Target[] };

/** Medians per scenario, ratios to the limit and auth-off rows, and peak RSS. */
export function rowsOf(scenarios: Scenario[], peakRss: Map<string, number | undefined>) {
  const rate = (id: string) =>
    median(scenarios.find((s) => s.id === id)?.rounds.map((r) => r.reqPerSec) ?? []);
  const [limit, authOff] = [rate('limit'), rate('auth-off')];
  return scenarios.map((s) => {
    const bad = s.rounds.reduce((sum, r) => sum + r.bad, 0);
    const of = (key: 'reqPerSec' | 'p50Ms' | 'p99Ms') => median(s.rounds.map((r) => r[key]));
    const reqPerSec = of('reqPerSec');
    return {
      id: s.id,
      scenario: s.name,
      reqPerSec,
      p50Ms: of('p50Ms'),
      p99Ms: of('p99Ms'),
      vsLimit: reqPerSec && limit && reqPerSec / limit,
      vsAuthOff: reqPerSec && authOff && reqPerSec / authOff,
      peakRssMiB: peakRss.get(s.id),
      note: s.unavailable ?? (bad ? `${bad} answers not 2xx` : undefined),
      rounds: s.rounds,
    };
  });
}

/**
 * The targets of ../shared/notes/performance.md and the operations issue. Ratios of rows the
 * gateway serves alone are judged on the paired medians; the table's ratio is shown beside.
 */
export function judgeTargets(rows: Row[], pairs: PairOutcome[]): Target[] {
  const rate = (id: string) => rows.find((r) => r.id === id)?.reqPerSec ?? NaN;
  const ratio = (a: string, b: string) => rate(a) / rate(b);
  const paired = (target: string, row: string, reference: string, min: number): Target => {
    const pair = pairs.find((p) => p.row === row && p.reference === reference);
    const table = ratio(row, reference);
    const beside = Number.isFinite(table) ? `; table ${table.toFixed(3)}` : '';
    if (!pair) return { target, measured: `not measured${beside}`, met: undefined };
    const rounds = pair.ratios.map((r) => r.toFixed(3)).join(', ');
    return {
      target,
      measured: `${pair.median.toFixed(3)} (${rounds}); by CPU time ${pair.byCpu.toFixed(3)}${beside}`,
      met: Number.isNaN(min) ? undefined : pair.median >= min,
    };
  };
  const times = (target: string, value: number, min: number): Target =>
    Number.isFinite(value)
      ? { target, measured: `${value.toFixed(0)} × (table)`, met: value >= min }
      : { target, measured: 'not measured', met: undefined };
  return [
    paired('Bearer ≥ 0.85 × limit (Node 24)', 'bearer', 'limit', 0.85),
    // "costs at most 10% more" per request: time per request ≤ 1.1 × that of auth off.
    paired('Bearer costs ≤ 10% more than auth off', 'bearer', 'auth-off', 1 / 1.1),
    paired('metrics on ≥ 0.97 × metrics off', 'bearer', 'bearer-metrics-off', 0.97),
    paired('Basic warm ≥ 0.85 × Bearer', 'basic-warm', 'bearer', 0.85),
    // Restated (issue 46): one P-256 verify costs about a Bearer request here (results.md).
    paired('DPoP (a fresh proof each request) ≥ 0.45 × Bearer', 'dpop', 'bearer', 0.45),
    times('Basic warm ≥ 100 × Basic without cache', ratio('basic-warm', 'basic-nocache'), 100),
    paired('flat with 10,000 tokens: ≥ 0.9 × 1 token', 'bearer-10k', 'bearer', 0.9),
    paired('flat with 100 realms: ≥ 0.9 × 1 realm', 'bearer-realms', 'bearer', 0.9),
    paired('no target: auth off ÷ limit, the gateway without auth', 'auth-off', 'limit', NaN),
    paired('no target: tracing on ÷ off, same gateway', 'bearer-tracing', 'bearer', NaN),
    paired('no target: control ÷ Bearer, identical processes', 'bearer-control', 'bearer', NaN),
  ];
}

/** The table, the paired rounds and the targets, as Markdown ready to paste. */
export function formatReport(report: Report): string {
  const num = (v: number | undefined, digits: number) => v?.toFixed(digits) ?? '';
  const out = [
    '| scenario | req/s | p50 ms | p99 ms | × limit | × auth off | peak RSS MiB |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...report.rows.map(
      (r) =>
        `| ${r.scenario}${r.note ? ` (${r.note})` : ''} | ${num(r.reqPerSec, 0)} | ${num(r.p50Ms, 2)} | ` +
        `${num(r.p99Ms, 2)} | ${num(r.vsLimit, 3)} | ${num(r.vsAuthOff, 3)} | ${num(r.peakRssMiB, 0)} |`,
    ),
    '',
    '| target | measured: paired median (rounds) | met |',
    '|---|---|---|',
    ...report.targets.map(
      (t) =>
        `| ${t.target} | ${t.measured} | ${t.met === undefined ? 'n/a' : t.met ? 'yes' : 'NO'} |`,
    ),
  ];
  return out.join('\n');
}

/** Writes `bench/results/<ISO timestamp>.json` (any mode's report) and returns its path. */
export async function writeReport(
  report: { startedAt: string } & Record<string, unknown>,
): Promise<string> {
  await mkdir('bench/results', { recursive: true });
  const file = `bench/results/${report.startedAt.replace(/:/g, '-')}.json`;
  await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
  return file;
}
