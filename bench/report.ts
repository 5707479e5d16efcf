import { mkdir, writeFile } from 'node:fs/promises';
import { PAIRS, type PairOutcome } from './pairs.ts';
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

/** The targets: each pair's (pairs.ts) on its paired median, the table's ratio beside. */
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
    ...PAIRS.map(([row, reference, min, target]) => paired(target, row, reference, min)),
    times('Basic warm ≥ 100 × Basic without cache', ratio('basic-warm', 'basic-nocache'), 100),
  ];
}

/** The table, the paired rounds and the targets, as Markdown ready to paste. */
export function formatReport(report: Report): string {
  const num = (v: number | undefined, digits: number) => v?.toFixed(digits) ?? '';
  return [
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
  ].join('\n');
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
