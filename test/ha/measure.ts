import { runLoad, type LoadRequest, type LoadResult } from '../../bench/load.ts';
import type { Haproxy } from './haproxy.ts';

/** The steady load of a phase, through HAProxy: bounded in rate and time, never a flood. */
export const LOAD = { connections: 8, rate: 200 } as const;

/** HAProxy's names of the replicas (ops/haproxy/haproxy.cfg), as the phases call them. */
const REPLICA_OF: Record<string, string> = { 'gateway-1': 'A', 'gateway-2': 'B' };

export interface PhaseLoad {
  result: LoadResult;
  /** Requests each replica answered, from HAProxy's log. */
  served: Record<string, number>;
  /** Replicas HAProxy took out of (or put back into) rotation while the load ran. */
  stateChanges: string[];
}

/**
 * Steady load through HAProxy, from a load generator process of its own (bench/load.ts):
 * `requests` taken in turn, for `seconds` (at most 20).
 */
export async function steadyLoad(
  haproxy: Haproxy,
  requests: LoadRequest[],
  seconds: number,
): Promise<PhaseLoad> {
  if (seconds > 20) throw new Error('a phase loads for 20 s at most');
  const offset = haproxy.logOffset();
  const result = await runLoad({
    url: haproxy.url,
    connections: LOAD.connections,
    durationSeconds: seconds,
    overallRate: LOAD.rate,
    requests,
  });
  const { served, stateChanges } = haproxy.logSince(offset);
  const byReplica = Object.fromEntries(
    Object.entries(served).map(([server, n]) => [REPLICA_OF[server] ?? server, n]),
  );
  return { result, served: byReplica, stateChanges };
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
  load: PhaseLoad | undefined,
  measurements: Record<string, string | number>,
): void {
  const lines = [`== HA phase: ${phase}`];
  if (load) {
    const { result, served, stateChanges } = load;
    lines.push(
      `  load through HAProxy: ${result.ok + result.bad} requests, ${result.bad} failed, ` +
        `p50 ${result.p50Ms.toFixed(1)} ms, p99 ${result.p99Ms.toFixed(1)} ms, ` +
        `statuses ${JSON.stringify(result.statusCodes)}`,
      `  answered by replica A / B: ${served.A ?? 0} / ${served.B ?? 0}`,
      `  replicas HAProxy took out of rotation: ${stateChanges.join('; ') || 'none'}`,
    );
  }
  for (const [name, value] of Object.entries(measurements)) lines.push(`  ${name}: ${value}`);
  console.log(lines.join('\n'));
}

/** "0.42 s", or "never" for a measurement that did not succeed in time. */
export function seconds(ms: number | undefined): string {
  return ms === undefined ? 'never' : `${(ms / 1000).toFixed(2)} s`;
}
