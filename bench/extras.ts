import type { BenchUser, Provisioner } from './fixtures.ts';
import { runLoad, runPaced, type LoadResult } from './load-spec.ts';
import { median, type HalfLoad } from './report.ts';
import { basicHeader, problemsOf, settle, type ScenarioRuns } from './scenarios.ts';
import type { BenchOptions } from './settings.ts';

type Log = (message: string) => void;

/**
 * Rounds of the half-load measurement: more than the table's, because each round is judged by
 * its p99, and one stall of the shared machine (tens of milliseconds, now and then) spoils the
 * p99 of the round it falls in.
 */
const HALF_LOAD_ROUNDS = 5;

/** The rows served together at half load, in this order; the first is the one judged. */
const HALF_LOAD_ROWS = ['bearer', 'bearer-control', 'auth-off'] as const;

/**
 * Latency at half load. One paced generator serves Bearer, its identical twin (control) and
 * auth off at once, request by request in turn, half of Bearer's median peak in all (a third
 * each), so that every stall of the shared machine delays all three alike. Per round, the p99
 * added by authentication is Bearer's p99 minus auth off's, and the noise of the method is the
 * control's p99 minus Bearer's: two identical processes in the same moments.
 *
 * Measured one after the other instead, the p99 of the same process moved by 5-55 ms between
 * rounds; pinned to one CPU, the generators and the upstream saturated the other and p99 rose
 * to hundreds of milliseconds at half load.
 */
export async function measureHalfLoad(
  runs: ScenarioRuns[],
  options: BenchOptions,
  log: Log,
): Promise<HalfLoad | undefined> {
  const rows = HALF_LOAD_ROWS.map((id) => runs.find((r) => r.scenario.id === id));
  const peak = median(rows[0]?.rounds.map((r) => r.reqPerSec) ?? []);
  if (!peak || rows.some((r) => !r || r.rounds.length === 0)) return undefined;
  const scenarios = rows.map((r) => r!.scenario);
  const rate = Math.max(HALF_LOAD_ROWS.length, Math.floor(peak / 2));
  const targets = scenarios.map((s) => ({ url: s.origin, ...s.requests[0]! }));

  const paced = (durationSeconds: number) =>
    runPaced({ targets, overallRate: rate, connections: options.connections, durationSeconds });
  // Not counted: the control idled since the table's rounds, and a process that idled runs
  // slower for its first seconds under load (the first round's p99 was the highest).
  if (options.warmupSeconds > 0) await paced(options.warmupSeconds);
  const results: LoadResult[][] = [];
  for (let round = 1; round <= HALF_LOAD_ROUNDS; round++) {
    await settle(log);
    const [bearer, control, authOff] = await paced(options.roundSeconds);
    results.push([bearer!, control!, authOff!]);
    const p99 = (r: LoadResult) => `${r.latencyMs.p99.toFixed(3)}`;
    log(
      `  half load round ${round}/${HALF_LOAD_ROUNDS}, ${rate} req/s in all: p99 Bearer ` +
        `${p99(bearer!)}, control ${p99(control!)}, auth off ${p99(authOff!)} ms` +
        [bearer!, control!, authOff!].map(problemsOf).join(''),
    );
  }
  const p99Of = (round: LoadResult[], i: number) => round[i]!.latencyMs.p99;
  const added = results.map((round) => p99Of(round, 0) - p99Of(round, 2));
  const noise = results.map((round) => p99Of(round, 1) - p99Of(round, 0));
  const medianOf = (i: number, key: 'p50' | 'p99') =>
    median(results.map((round) => round[i]!.latencyMs[key])) ?? 0;
  const latency = (i: number) => ({ p50Ms: medianOf(i, 'p50'), p99Ms: medianOf(i, 'p99') });
  return {
    rate,
    peakReqPerSec: peak,
    bearer: latency(0),
    control: latency(1),
    authOff: latency(2),
    addedP99PerRoundMs: added,
    noiseP99PerRoundMs: noise,
    addedP99Ms: median(added) ?? 0,
    noiseP99Ms: median(noise.map(Math.abs)) ?? 0,
    rounds: scenarios.map((scenario, i) => ({
      scenario,
      rounds: results.map((round) => round[i]!),
    })),
  };
}

export interface BurstOutcome {
  user: string;
  requests: number;
  ok: number;
  statusCodes: Record<string, number>;
  passwordGrants: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

/**
 * Cold Basic burst: `size` connections each send one identical Basic request at once, with a
 * user the gateway has never seen. Keycloak sessions of the user afterwards = password grants.
 */
export async function measureBurst(
  origin: string,
  path: string,
  user: BenchUser,
  size: number,
  provisioner: Provisioner,
): Promise<BurstOutcome> {
  const before = await provisioner.sessionCount(user);
  const result = await runLoad({
    url: origin,
    connections: size,
    amount: size,
    requests: [{ path, authorization: basicHeader(user) }],
  });
  const after = await provisioner.sessionCount(user);
  return {
    user: user.username,
    requests: size,
    ok: result.ok,
    statusCodes: result.statusCodes,
    passwordGrants: after - before,
    p50Ms: result.latencyMs.p50,
    p99Ms: result.latencyMs.p99,
    maxMs: result.latencyMs.max,
  };
}

/**
 * Keycloak sessions of the cache-off users (one per password grant) against the 200 answers
 * of that scenario's check, warm-up and rounds.
 */
export async function grantsVersusAnswers(
  runs: ScenarioRuns[],
  users: BenchUser[],
  provisioner: Provisioner,
  connections: number,
): Promise<string> {
  const run = runs.find((r) => r.scenario.id === 'basic-nocache');
  if (!run || run.rounds.length === 0) return 'Basic cache off: not measured';
  let grants = 0;
  for (const u of users) grants += await provisioner.sessionCount(u);
  const measured = [...(run.warmup ? [run.warmup] : []), ...run.rounds];
  const answered = 1 + measured.reduce((sum, r) => sum + r.ok, 0);
  return (
    `Basic cache off: ${grants} password grants reached Keycloak (sessions of the ${users.length} ` +
    `users) for ${answered} answers (check, warm-up, rounds); up to ${connections} more requests ` +
    `were in flight when each of the ${measured.length} runs stopped`
  );
}
