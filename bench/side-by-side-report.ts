import type { Target } from './report.ts';
import { median } from './stats.ts';
import {
  GATEWAY_OF,
  MODES,
  NAMES,
  type Mode,
  type RowId,
  type SideBySide,
} from './side-by-side.ts';

/**
 * The side-by-side rows as Markdown: req/s per row and mode, realmgate's ratios to the limit,
 * Apache and HAProxy (median of rounds, each round's ratio beside), the issue's targets, and
 * the p99 latency realmgate adds at half its peak.
 */

const TARGETS: { mode: Mode; row: RowId; reference: RowId; min: number }[] = [
  // Issue 47: the whole admission for what a bare undici proxy costs.
  { mode: 'per core', row: 'realmgate-1', reference: 'limit-undici', min: 1.0 },
  { mode: 'per core', row: 'realmgate-1', reference: 'apache', min: 1.3 },
  { mode: 'whole machine', row: 'realmgate-auto', reference: 'apache', min: 1.3 },
];

/** row ÷ reference in `mode`: the ratio of medians, and each round's ratio (interleaved). */
export function ratioOf(result: SideBySide, mode: Mode, row: RowId, reference: RowId) {
  const rowsOf = result.modes.find((m) => m.mode === mode)?.rows;
  const [a, b] = [row, reference].map((id) => rowsOf?.find((r) => r.id === id));
  if (!a?.reqPerSec || !b?.reqPerSec) return undefined;
  const rounds = a.rounds.map((r, i) => r.reqPerSec / Math.max(b.rounds[i]?.reqPerSec ?? 0, 1));
  return { median: a.reqPerSec / b.reqPerSec, rounds, roundsMedian: median(rounds)! };
}

export function judgeSideTargets(result: SideBySide): Target[] {
  return TARGETS.map(({ mode, row, reference, min }) => {
    const target = `${mode}: ${NAMES[row]} ≥ ${min} × ${NAMES[reference]}`;
    const ratio = ratioOf(result, mode, row, reference);
    if (!ratio) return { target, measured: 'not measured', met: undefined };
    return { target, measured: describe(ratio), met: ratio.median >= min };
  });
}

function describe(ratio: NonNullable<ReturnType<typeof ratioOf>>): string {
  return `${ratio.median.toFixed(3)} (rounds ${ratio.rounds.map((r) => r.toFixed(2)).join(', ')})`;
}

export function formatSideBySide(result: SideBySide): string {
  if (result.modes.length === 0) return result.notes.join('\n');
  const num = (v: number | undefined, digits: number) => v?.toFixed(digits) ?? '';
  const cell = (mode: Mode, id: RowId) => {
    const row = result.modes.find((m) => m.mode === mode)?.rows.find((r) => r.id === id);
    if (!row || row.unavailable) return `${row?.unavailable ?? 'not measured'} | | | |`;
    const bad = row.rounds.reduce((sum, r) => sum + r.bad, 0);
    const rate = `${num(row.reqPerSec, 0)}${bad ? ` (${bad} failed)` : ''}`;
    const cost = `${num(row.cpuMicrosPerRequest, 0)} | ${num(row.cpusBusy, 2)}`;
    return `${rate} | ${num(row.p99Ms, 2)} | ${cost}`;
  };
  const ids = result.modes[0]!.rows.map((r) => r.id);
  // Each mode's realmgate row (WORKERS=1 per core, auto on the whole machine) ÷ each reference.
  const ratioRows = (['limit', 'limit-undici', 'apache', 'haproxy'] as const).map((reference) => {
    const cells = MODES.map((mode) => {
      const ratio = ratioOf(result, mode, GATEWAY_OF[mode], reference);
      return ratio ? describe(ratio) : 'not measured';
    });
    return `| realmgate ÷ ${NAMES[reference]} | ${cells.join(' | ')} |`;
  });
  const latencyRows = MODES.flatMap((mode) => {
    const l = result.modes.find((m) => m.mode === mode)?.latency;
    if (!l) return [`| ${mode} | not measured | | | |`];
    return [
      `| ${mode}, ${NAMES[GATEWAY_OF[mode]]} | ${l.rate} | ${num(l.limitP99Ms, 2)} | ${num(l.gatewayP99Ms, 2)} | ${num(l.addedP99Ms, 2)} |`,
    ];
  });
  return [
    '| row (wrk) | per core req/s | p99 ms | CPU µs/req | CPUs busy | whole machine req/s | p99 ms | CPU µs/req | CPUs busy |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...ids.map((id) => `| ${NAMES[id]} | ${MODES.map((mode) => cell(mode, id)).join(' | ')} |`),
    '',
    '| ratio: median of rows (each round) | per core (WORKERS=1) | whole machine (auto) |',
    '|---|---|---|',
    ...ratioRows,
    '',
    "| at half of realmgate's peak | req/s | limit p99 ms | realmgate p99 ms | added p99 ms |",
    '|---|---:|---:|---:|---:|',
    ...latencyRows,
    '',
    '| target (issues 23, 47) | measured | met |',
    '|---|---|---|',
    ...judgeSideTargets(result).map(
      (t) =>
        `| ${t.target} | ${t.measured} | ${t.met === undefined ? 'n/a' : t.met ? 'met' : 'not met'} |`,
    ),
  ].join('\n');
}
