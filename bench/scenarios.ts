import type { BenchUser } from './fixtures.ts';
import { runLoad, type LoadRequest, type LoadResult, type LoadSpec } from './load-spec.ts';
import type { BenchOptions } from './settings.ts';
import { waitUntilQuiet } from './stack.ts';

/**
 * Before each measurement, wait (at most this long) until the machine is 80% idle: Keycloak,
 * which shares the cores, may still be busy with work of the previous row (background
 * re-checks, grants still in flight when a load stopped).
 */
const QUIET_WAIT_SECONDS = 20;

/** One row of the table: a target and the requests sent to it. */
export interface Scenario {
  id: string;
  name: string;
  /** Origin of the process under load. */
  origin: string;
  /** Its process id (for pinning it to a CPU in the paired rounds). */
  pid?: number;
  requests: LoadRequest[];
  /** Warm up with this many requests (e.g. one pass over every token) instead of by time. */
  warmupAmount?: number;
  /** Every request reaches Keycloak: measured last in each round, followed by a pause. */
  keycloakBound?: boolean;
  /** Set when the scenario cannot run; the row then says why. */
  unavailable?: string;
}

export interface ScenarioRuns {
  scenario: Scenario;
  warmup?: LoadResult;
  rounds: LoadResult[];
}

type Log = (message: string) => void;

/** The proxied automation route of an organization's workspace. */
export function automationPath(organization: string, workspace: string): string {
  return `/api/${organization}/workspaces/${workspace}/ita/menu/operation_list/filter/`;
}

export function basicHeader(user: BenchUser): string {
  return `Basic ${Buffer.from(`${user.username}:${user.password}`).toString('base64')}`;
}

/**
 * Checks each scenario once, warms each up, then runs `rounds` rounds in which every scenario
 * is measured once (interleaved, so that drift of a shared machine spreads over all rows).
 */
export async function measureScenarios(
  scenarios: Scenario[],
  options: BenchOptions,
  log: Log,
): Promise<ScenarioRuns[]> {
  const runs: ScenarioRuns[] = scenarios.map((scenario) => ({ scenario, rounds: [] }));
  for (const { scenario } of runs) {
    if (scenario.unavailable) continue;
    const problem = await checkOnce(scenario);
    if (problem) {
      scenario.unavailable = problem;
      log(`  ${scenario.name}: ${problem}`);
    }
  }
  const active = runs.filter(({ scenario }) => !scenario.unavailable);
  const ordered = [
    ...active.filter(({ scenario }) => !scenario.keycloakBound),
    ...active.filter(({ scenario }) => scenario.keycloakBound),
  ];
  for (const run of ordered) {
    const { scenario } = run;
    log(`  warm-up: ${scenario.name}`);
    run.warmup = await runLoad({
      url: scenario.origin,
      connections: options.connections,
      durationSeconds: options.warmupSeconds,
      amount: scenario.warmupAmount,
      requests: scenario.requests,
    });
  }
  // Rows served by the gateway alone first, interleaved; then the rows bound by Keycloak, whose
  // CPU (Keycloak shares the cores) would otherwise still be busy when the next row starts.
  const gatewayBound = ordered.filter(({ scenario }) => !scenario.keycloakBound);
  const keycloakBound = ordered.filter(({ scenario }) => scenario.keycloakBound);
  for (const group of [gatewayBound, keycloakBound]) {
    for (let round = 1; round <= options.rounds; round++) {
      for (const run of group) {
        await settle(log);
        const result = await runLoad(roundOf(run.scenario, options));
        run.rounds.push(result);
        log(
          `  round ${round}/${options.rounds} ${run.scenario.name}: ${result.reqPerSec.toFixed(0)} req/s, ` +
            `p99 ${result.latencyMs.p99.toFixed(2)} ms${problemsOf(result)}`,
        );
      }
    }
  }
  return runs;
}

/** One measured round of a scenario: its requests, the usual connections and duration. */
export function roundOf(scenario: Scenario, options: BenchOptions): LoadSpec {
  return {
    url: scenario.origin,
    connections: options.connections,
    durationSeconds: options.roundSeconds,
    requests: scenario.requests,
  };
}

/** Waits for a quiet machine; says so when it did not come. */
export async function settle(log: Log): Promise<void> {
  const { quiet, note } = await waitUntilQuiet(QUIET_WAIT_SECONDS);
  if (!quiet) log(`  ${note}; measuring anyway`);
}

async function checkOnce(scenario: Scenario): Promise<string | undefined> {
  const first = scenario.requests[0];
  if (!first) return 'no request';
  try {
    const res = await fetch(`${scenario.origin}${first.path}`, {
      headers: first.authorization ? { authorization: first.authorization } : {},
      signal: AbortSignal.timeout(30_000),
    });
    const body = await res.text();
    return res.status === 200 ? undefined : `check failed: ${res.status} ${body.slice(0, 200)}`;
  } catch (err) {
    return `check failed: ${(err as Error).message}`;
  }
}

/** Non-2xx answers, errors and time-outs of a run, for the progress log. */
export function problemsOf(result: LoadResult): string {
  const bad = result.non2xx + result.errors + result.timeouts;
  return bad > 0
    ? ` (non-2xx ${result.non2xx}, errors ${result.errors}, timeouts ${result.timeouts}: ` +
        `${JSON.stringify(result.statusCodes)})`
    : '';
}
