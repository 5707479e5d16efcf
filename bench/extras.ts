import type { BenchUser, Provisioner } from './fixtures.ts';
import { runLoad } from './load-spec.ts';
import { median, type HalfLoad } from './report.ts';
import { basicHeader, measureAtRate, type ScenarioRuns } from './scenarios.ts';
import type { BenchOptions } from './settings.ts';

type Log = (message: string) => void;

/** Bearer and auth off at the same offered rate, half of Bearer's measured peak, paced. */
export async function measureHalfLoad(
  runs: ScenarioRuns[],
  options: BenchOptions,
  log: Log,
): Promise<HalfLoad | undefined> {
  const bearer = runs.find((r) => r.scenario.id === 'bearer');
  const authOff = runs.find((r) => r.scenario.id === 'auth-off');
  const peak = median(bearer?.rounds.map((r) => r.reqPerSec) ?? []);
  if (!bearer || !authOff || !peak || authOff.rounds.length === 0) return undefined;
  const rate = Math.max(1, Math.floor(peak / 2));
  const rounds = await measureAtRate([bearer.scenario, authOff.scenario], rate, options, log);
  const p = (i: number, key: 'p50' | 'p99') =>
    median(rounds[i]!.rounds.map((r) => r.latencyMs[key])) ?? 0;
  const spread = (i: number) => {
    const p99s = rounds[i]!.rounds.map((r) => r.latencyMs.p99);
    return Math.max(...p99s) - Math.min(...p99s);
  };
  return {
    rate,
    bearerP50Ms: p(0, 'p50'),
    bearerP99Ms: p(0, 'p99'),
    authOffP50Ms: p(1, 'p50'),
    authOffP99Ms: p(1, 'p99'),
    addedP99Ms: p(0, 'p99') - p(1, 'p99'),
    p99SpreadMs: Math.max(spread(0), spread(1)),
    rounds,
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
