import { runLoad, type LoadResult } from './load-spec.ts';
import { withPinning, type Others } from './pinning.ts';
import { cpuMicrosOf } from './processes.ts';
import { median } from './report.ts';
import { roundOf, settle, type Scenario, type ScenarioRuns } from './scenarios.ts';
import type { BenchOptions } from './settings.ts';

type Log = (message: string) => void;

/**
 * The ratios the targets are about, each measured with both rows under load at the same moment
 * (one load generator each, the usual connections), the two processes pinned together on one
 * CPU and the upstream and load generators on the other(s). The scheduler then gives each the
 * same share of that CPU, so the ratio of their rates is the ratio of their costs per request,
 * whatever the rest of this shared machine does meanwhile. Rows measured one after the other
 * move by 10-25% between 5 s runs here; paired ratios stay within a few percent.
 */
const PAIRS: { row: string; reference: string }[] = [
  { row: 'bearer', reference: 'limit' },
  { row: 'bearer', reference: 'auth-off' },
  { row: 'basic-warm', reference: 'bearer' },
  { row: 'bearer-10k', reference: 'bearer' },
  // Tells whether what 10,000 tokens cost comes from the background re-checks or the tokens.
  { row: 'bearer-10k-revocation-off', reference: 'bearer' },
  { row: 'bearer-realms', reference: 'bearer' },
];

export interface PairOutcome {
  row: string;
  reference: string;
  /** Whether the rounds ran pinned as described above (taskset available, 2+ CPUs). */
  pinned: boolean;
  /** row req/s ÷ reference req/s, per round. */
  ratios: number[];
  median: number;
  /** CPU time per answered request of each process (µs), medians over the rounds. */
  rowCpuMicrosPerRequest?: number;
  referenceCpuMicrosPerRequest?: number;
  rounds: { row: LoadResult; reference: LoadResult }[];
}

export async function measurePairs(
  runs: ScenarioRuns[],
  others: Others,
  options: BenchOptions,
  log: Log,
): Promise<PairOutcome[]> {
  const measured = (id: string) =>
    runs.find((r) => r.scenario.id === id && r.rounds.length > 0)?.scenario;
  const outcomes: PairOutcome[] = [];
  for (const pair of PAIRS) {
    const row = measured(pair.row);
    const reference = measured(pair.reference);
    if (!row || !reference) continue;
    const outcome: PairOutcome = { ...pair, pinned: true, ratios: [], median: 0, rounds: [] };
    const rowCpu: (number | undefined)[] = [];
    const referenceCpu: (number | undefined)[] = [];
    let pinned = false;
    const both = (seconds: number) =>
      withPinning([row.pid, reference.pid], others, (feeders) => {
        pinned = feeders !== undefined;
        const load = (scenario: Scenario) => ({
          ...roundOf(scenario, options),
          durationSeconds: seconds,
        });
        return Promise.all([runLoad(load(row), feeders), runLoad(load(reference), feeders)]);
      });
    // Not counted: a process that idled while other rows were measured runs slower for its
    // first seconds under load, and its first paired round came out the lowest of a pair.
    if (options.warmupSeconds > 0) await both(options.warmupSeconds);
    for (let round = 1; round <= options.rounds; round++) {
      await settle(log);
      const cpuBefore = [cpuMicrosOf(row.pid ?? -1), cpuMicrosOf(reference.pid ?? -1)];
      const [rowResult, referenceResult] = await both(options.roundSeconds);
      outcome.pinned &&= pinned;
      const cpuAfter = [cpuMicrosOf(row.pid ?? -1), cpuMicrosOf(reference.pid ?? -1)];
      rowCpu.push(perRequest(cpuBefore[0], cpuAfter[0], rowResult));
      referenceCpu.push(perRequest(cpuBefore[1], cpuAfter[1], referenceResult));
      const ratio = rowResult.reqPerSec / Math.max(referenceResult.reqPerSec, 1);
      outcome.rounds.push({ row: rowResult, reference: referenceResult });
      outcome.ratios.push(ratio);
      log(
        `  paired round ${round}/${options.rounds} ${pair.row} ${rowResult.reqPerSec.toFixed(0)} ` +
          `vs ${pair.reference} ${referenceResult.reqPerSec.toFixed(0)} req/s: ${ratio.toFixed(3)}` +
          (pinned ? '' : ' (not pinned)'),
      );
    }
    outcome.median = median(outcome.ratios) ?? 0;
    outcome.rowCpuMicrosPerRequest = median(rowCpu.filter((v) => v !== undefined));
    outcome.referenceCpuMicrosPerRequest = median(referenceCpu.filter((v) => v !== undefined));
    outcomes.push(outcome);
  }
  return outcomes;
}

/**
 * CPU per 2xx answer over a round. It includes the few requests of the warm-up second and the
 * idle process's own background, so it is an upper bound, compared between the two of a pair.
 */
function perRequest(
  before: number | undefined,
  after: number | undefined,
  result: LoadResult,
): number | undefined {
  if (before === undefined || after === undefined || result.ok === 0) return undefined;
  return (after - before) / result.ok;
}
