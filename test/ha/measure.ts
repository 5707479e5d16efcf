import { runLoad, type LoadRequest, type LoadResult } from '../../bench/load.ts';
import type { GatewayProcess } from './gateway-process.ts';

/** The steady load of a phase on each replica: bounded in rate and time, never a flood. */
export const LOAD = { connections: 4, ratePerReplica: 100 } as const;

export interface PhaseLoad {
  replica: string;
  result: LoadResult;
}

/**
 * Steady load on every replica at once, each from a load generator process of its own
 * (bench/load.ts): `requests` taken in turn, for `seconds` (at most 20).
 */
export async function steadyLoad(
  replicas: { name: string; gateway: GatewayProcess }[],
  requests: LoadRequest[],
  seconds: number,
): Promise<PhaseLoad[]> {
  if (seconds > 20) throw new Error('a phase loads for 20 s at most');
  return Promise.all(
    replicas.map(async ({ name, gateway }) => ({
      replica: name,
      result: await runLoad({
        url: gateway.url,
        connections: LOAD.connections,
        durationSeconds: seconds,
        overallRate: LOAD.ratePerReplica,
        requests,
      }),
    })),
  );
}

export interface Attempts {
  /** Milliseconds from `since` to the first success; undefined if none within the limit. */
  ms: number | undefined;
  tries: number;
  /** What the failed tries answered (status codes, or the error's message). */
  failures: string[];
}

/**
 * Tries `work` until it answers `ok`, with 50 ms between tries, for at most `limitMs` from
 * `since`; times the first success from `since` (a timestamp taken when the event happened).
 */
export async function timeUntil(
  since: number,
  work: () => Promise<number>,
  ok: (status: number) => boolean,
  limitMs = 10_000,
): Promise<Attempts> {
  const failures: string[] = [];
  let tries = 0;
  while (performance.now() - since < limitMs) {
    tries++;
    const outcome = await work().catch((err: unknown) => (err as Error).message);
    if (typeof outcome === 'number' && ok(outcome)) {
      return { ms: Math.round(performance.now() - since), tries, failures };
    }
    failures.push(String(outcome));
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { ms: undefined, tries, failures };
}

/** Prints a phase's figures as one block, so that they show in the CI output. */
export function printFigures(
  phase: string,
  loads: PhaseLoad[],
  measurements: Record<string, string | number>,
): void {
  const lines = [`== HA phase: ${phase}`];
  for (const { replica, result } of loads) {
    const requests = result.ok + result.bad;
    lines.push(
      `  load on replica ${replica}: ${requests} requests, ${result.bad} failed, ` +
        `p50 ${result.p50Ms.toFixed(1)} ms, p99 ${result.p99Ms.toFixed(1)} ms, ` +
        `statuses ${JSON.stringify(result.statusCodes)}`,
    );
  }
  for (const [name, value] of Object.entries(measurements)) lines.push(`  ${name}: ${value}`);
  console.log(lines.join('\n'));
}

/** "0.42 s", or "never" for a measurement that did not succeed in time. */
export function seconds(ms: number | undefined): string {
  return ms === undefined ? 'never' : `${(ms / 1000).toFixed(2)} s`;
}
