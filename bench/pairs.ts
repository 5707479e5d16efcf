import { cpus } from 'node:os';
import { ALL_CPUS, FEEDER_CPUS, MEASURED_CPU, pinTree, taskset } from './affinity.ts';
import { runTogether, type LoadResult } from './load.ts';
import { cpuSeconds } from './processes.ts';
import { median } from './stats.ts';
import { loadOf, type Scenario } from './scenarios.ts';
import type { BenchOptions } from './settings.ts';

/**
 * The pairs, row ÷ reference, each with its target (../shared/notes/performance.md; `min` NaN:
 * none). The control pair (two identical processes) shows the method's spread.
 */
export const PAIRS = [
  ['bearer', 'limit', 0.85, 'Bearer ≥ 0.85 × limit (Node 24)'],
  // "costs at most 10% more" per request: time per request ≤ 1.1 × that of auth off.
  ['bearer', 'auth-off', 1 / 1.1, 'Bearer costs ≤ 10% more than auth off'],
  ['bearer', 'bearer-metrics-off', 0.97, 'metrics on ≥ 0.97 × metrics off'],
  ['basic-warm', 'bearer', 0.85, 'Basic warm ≥ 0.85 × Bearer'],
  // Restated (issue 46): one P-256 verify costs about a Bearer request here (results.md).
  ['dpop', 'bearer', 0.45, 'DPoP (a fresh proof each request) ≥ 0.45 × Bearer'],
  ['bearer-10k', 'bearer', 0.9, 'flat with 10,000 tokens: ≥ 0.9 × 1 token'],
  ['bearer-realms', 'bearer', 0.9, 'flat with 100 realms: ≥ 0.9 × 1 realm'],
  ['auth-off', 'limit', NaN, 'no target: auth off ÷ limit, the gateway without auth'],
  ['bearer-tracing', 'bearer', NaN, 'no target: tracing on ÷ off, same gateway'],
  ['bearer-control', 'bearer', NaN, 'no target: control ÷ Bearer, identical processes'],
] as const;

export type PairOutcome = Awaited<ReturnType<typeof measurePairs>>[number];

/**
 * Each pair under load at once, the two processes pinned together on the last CPU, the rest
 * (`keepOff`, the generators) on the other(s) (README.md, "Paired rounds"); an uncounted
 * paired warm-up first: a process that idled is slow for its first seconds.
 */
export async function measurePairs(
  scenarios: Scenario[],
  keepOff: number[],
  options: BenchOptions,
  log: (text: string) => void,
) {
  const canPin =
    cpus().length > 1 &&
    (await Promise.all(keepOff.map((pid) => pinTree(pid, FEEDER_CPUS)))).every(Boolean);
  const outcomes = [];
  try {
    for (const [rowId, referenceId] of PAIRS) {
      const row = scenarios.find((s) => s.id === rowId && s.rounds.length > 0);
      const reference = scenarios.find((s) => s.id === referenceId && s.rounds.length > 0);
      if (!row?.pid || !reference?.pid) continue;
      const pids = [row.pid, reference.pid];
      const pinned =
        canPin && (await Promise.all(pids.map((pid) => taskset(pid, MEASURED_CPU)))).every(Boolean);
      const both = (seconds: number) =>
        runTogether(
          [row, reference].map((s) => loadOf(s, options, seconds)),
          pinned ? FEEDER_CPUS : undefined,
        );
      await both(options.warmupSeconds);
      const rounds = await pairedRounds(pids, both, options, (round, n) => {
        const [r, ref] = round.results.map((x) => x.reqPerSec.toFixed(0));
        const cost = round.cpuMicros.map((c) => c.toFixed(0)).join(' and ');
        log(
          `  paired ${n}: ${rowId} ${r}, ${referenceId} ${ref} req/s: ${round.ratio.toFixed(3)} (CPU µs/answer ${cost})`,
        );
      });
      await Promise.all(pids.map((pid) => taskset(pid, ALL_CPUS)));
      const ratios = rounds.map((r) => r.ratio);
      outcomes.push({
        row: rowId,
        reference: referenceId,
        pinned,
        ratios,
        median: median(ratios)!,
        byCpu: median(rounds.map((r) => r.byCpu))!,
        rounds,
      });
    }
  } finally {
    await Promise.all(keepOff.map((pid) => pinTree(pid, ALL_CPUS)));
  }
  return outcomes;
}

export type PairedRound = {
  results: LoadResult[];
  cpuMicros: number[];
  ratio: number;
  byCpu: number;
};

/**
 * Rounds of `both` (this file's pairs, ab.ts): each round's first ÷ second by rate, and by
 * CPU time (the second's CPU µs per answer ÷ the first's: the ratio from cost itself).
 */
export async function pairedRounds(
  pids: number[],
  both: (seconds: number) => Promise<LoadResult[]>,
  { rounds, roundSeconds }: { rounds: number; roundSeconds: number },
  onRound: (round: PairedRound, n: number) => void,
): Promise<PairedRound[]> {
  const done: PairedRound[] = [];
  for (let n = 1; n <= rounds; n++) {
    const cpuBefore = pids.map(cpuSeconds);
    const results = await both(roundSeconds);
    const cpuMicros = results.map(
      (x, i) => ((cpuSeconds(pids[i]!) - cpuBefore[i]!) * 1e6) / Math.max(x.ok, 1),
    );
    const ratio = results[0]!.reqPerSec / Math.max(results[1]!.reqPerSec, 1);
    const byCpu = cpuMicros[1]! / Math.max(cpuMicros[0]!, 1e-9);
    const round = { results, cpuMicros, ratio, byCpu };
    onRound(round, n);
    done.push(round);
  }
  return done;
}
