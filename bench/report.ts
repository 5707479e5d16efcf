import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { LoadResult } from './load-spec.ts';
import type { BurstOutcome } from './extras.ts';
import type { PairOutcome } from './pairs.ts';
import type { ScenarioRuns } from './scenarios.ts';

/** One table row: medians over the rounds of one scenario. */
export interface Row {
  id: string;
  scenario: string;
  reqPerSec: number | undefined;
  p50Ms: number | undefined;
  p99Ms: number | undefined;
  vsLimit: number | undefined;
  vsAuthOff: number | undefined;
  /** Why there are no numbers, or what is odd about them (non-2xx answers...). */
  note?: string;
  rounds: LoadResult[];
}

/** Medians over the rounds of one row at half load. */
export interface Latency {
  p50Ms: number;
  p99Ms: number;
}

export interface HalfLoad {
  /** Requests per second in all, half of `peakReqPerSec`; each of the three rows gets a third. */
  rate: number;
  /** Bearer's median req/s in the table. */
  peakReqPerSec: number;
  /** Medians over the rounds. */
  bearer: Latency;
  control: Latency;
  authOff: Latency;
  /** Per round: Bearer p99 − auth-off p99. */
  addedP99PerRoundMs: number[];
  /** Per round: control p99 − Bearer p99 (two identical processes: the method's noise). */
  noiseP99PerRoundMs: number[];
  /** Median of `addedP99PerRoundMs`. */
  addedP99Ms: number;
  /** Median of the absolute values of `noiseP99PerRoundMs`. */
  noiseP99Ms: number;
  rounds: ScenarioRuns[];
}

export interface MemoryFigure {
  gateway: string;
  idleRssMiB: number | undefined;
  peakRssMiB: number | undefined;
}

export interface Target {
  target: string;
  measured: string;
  met: boolean | undefined;
}

export interface BenchReport {
  startedAt: string;
  finishedAt: string;
  machine: { cpus: number; node: string; platform: string };
  options: Record<string, unknown>;
  rows: Row[];
  pairs: PairOutcome[];
  halfLoad?: HalfLoad;
  bursts: BurstOutcome[];
  memory: MemoryFigure[];
  targets: Target[];
  profile?: { file: string; summary: string };
  notes: string[];
}

export function median(values: number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Medians per scenario, and ratios to the `limit` and `auth-off` rows. */
export function rowsOf(runs: ScenarioRuns[]): Row[] {
  const rows: Row[] = runs.map(({ scenario, rounds }) => {
    const bad = rounds.reduce((sum, r) => sum + r.non2xx + r.errors + r.timeouts, 0);
    const note =
      scenario.unavailable ??
      (bad > 0 ? `${bad} non-2xx/errors/timeouts over ${rounds.length} rounds` : undefined);
    return {
      id: scenario.id,
      scenario: scenario.name,
      reqPerSec: median(rounds.map((r) => r.reqPerSec)),
      p50Ms: median(rounds.map((r) => r.latencyMs.p50)),
      p99Ms: median(rounds.map((r) => r.latencyMs.p99)),
      vsLimit: undefined,
      vsAuthOff: undefined,
      ...(note ? { note } : {}),
      rounds,
    };
  });
  const limit = rows.find((r) => r.id === 'limit')?.reqPerSec;
  const authOff = rows.find((r) => r.id === 'auth-off')?.reqPerSec;
  for (const row of rows) {
    if (row.reqPerSec === undefined) continue;
    row.vsLimit = limit ? row.reqPerSec / limit : undefined;
    row.vsAuthOff = authOff ? row.reqPerSec / authOff : undefined;
  }
  return rows;
}

/** The one table, as Markdown so that it can be pasted as is. */
export function formatTable(rows: Row[]): string {
  const num = (v: number | undefined, digits: number) => (v === undefined ? '' : v.toFixed(digits));
  const lines = [
    '| scenario | req/s | p50 ms | p99 ms | × limit | × auth off |',
    '|---|---:|---:|---:|---:|---:|',
  ];
  for (const row of rows) {
    if (row.reqPerSec === undefined) {
      lines.push(`| ${row.scenario} | ${row.note ?? 'n/a'} | | | | |`);
      continue;
    }
    const name = row.note ? `${row.scenario} (${row.note})` : row.scenario;
    lines.push(
      `| ${name} | ${num(row.reqPerSec, 0)} | ${num(row.p50Ms, 2)} | ${num(row.p99Ms, 2)} | ` +
        `${num(row.vsLimit, 3)} | ${num(row.vsAuthOff, 3)} |`,
    );
  }
  return lines.join('\n');
}

export function formatExtras(report: BenchReport): string {
  const out: string[] = [];
  for (const p of report.pairs) {
    out.push(
      `paired: ${p.row} ÷ ${p.reference} (both under load at once) = ${p.median.toFixed(3)} ` +
        `(rounds ${p.ratios.map((r) => r.toFixed(3)).join(', ')}); CPU per request ` +
        `${micros(p.rowCpuMicrosPerRequest)} vs ${micros(p.referenceCpuMicrosPerRequest)}` +
        (p.pinned ? '' : '; not pinned'),
    );
  }
  const h = report.halfLoad;
  if (h) {
    const ms = (v: number) => `${v >= 0 ? '+' : ''}${v.toFixed(3)}`;
    out.push(
      `half load: ${h.rate} req/s in all (half of Bearer's ${h.peakReqPerSec.toFixed(0)}), ` +
        `Bearer, control and auth off served in turn by one paced generator; p99 added by ` +
        `authentication per round ${h.addedP99PerRoundMs.map(ms).join(', ')} ms (median ` +
        `${ms(h.addedP99Ms)} ms); noise, control minus Bearer, per round ` +
        `${h.noiseP99PerRoundMs.map(ms).join(', ')} ms (median size ${h.noiseP99Ms.toFixed(3)} ` +
        `ms); medians p50/p99: Bearer ${latencyOf(h.bearer)}, control ${latencyOf(h.control)}, ` +
        `auth off ${latencyOf(h.authOff)} ms`,
    );
  }
  for (const b of report.bursts) {
    out.push(
      `cold Basic burst: ${b.requests} concurrent identical requests, never-seen user ${b.user}: ` +
        `${b.passwordGrants} password grant(s) reached Keycloak; ${b.ok} answered 200 ` +
        `${JSON.stringify(b.statusCodes)}; p50 ${b.p50Ms.toFixed(1)} ms, p99 ${b.p99Ms.toFixed(1)} ms`,
    );
  }
  for (const m of report.memory) {
    out.push(
      `memory, ${m.gateway}: RSS ${mib(m.idleRssMiB)} after start, peak RSS (VmHWM) ${mib(m.peakRssMiB)}`,
    );
  }
  if (report.targets.length) {
    out.push('', '| target | measured | met |', '|---|---|---|');
    for (const t of report.targets) {
      out.push(`| ${t.target} | ${t.measured} | ${verdict(t)} |`);
    }
  }
  return out.join('\n');
}

function verdict(t: Target): string {
  if (t.met === undefined) return t.measured === 'n/a' ? 'n/a' : 'inconclusive';
  return t.met ? 'yes' : 'NO';
}

function latencyOf(l: Latency): string {
  return `${l.p50Ms.toFixed(3)}/${l.p99Ms.toFixed(3)}`;
}

function micros(v: number | undefined): string {
  return v === undefined ? 'n/a' : `${v.toFixed(1)} µs`;
}

function mib(v: number | undefined): string {
  return v === undefined ? 'n/a' : `${v.toFixed(1)} MiB`;
}

/** Writes `bench/results/<ISO timestamp>.json` and returns its path. */
export async function writeReport(dir: string, report: BenchReport): Promise<string> {
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, `${report.startedAt.replace(/:/g, '-')}.json`);
  await writeFile(file, `${JSON.stringify(report, null, 2)}\n`);
  return file;
}
