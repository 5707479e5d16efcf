import { runLoad, type LoadResult } from './load.ts';
import { median } from './stats.ts';
import { automationPath } from './scenarios.ts';
import { origin, type BenchOptions } from './settings.ts';

/**
 * The p99 the gateway adds at half of its peak: it and the limit at that steady rate
 * (autocannon's `overallRate`: wrk has none), rounds interleaved, the difference of the medians.
 */
export interface HalfLoadLatency {
  gateway: string;
  rate: number;
  gatewayRounds: LoadResult[];
  limitRounds: LoadResult[];
  gatewayP99Ms?: number;
  limitP99Ms?: number;
  /** Median gateway p99 − median limit p99. */
  addedP99Ms?: number;
}

export async function measureHalfLoad(input: {
  gateway: { id: string; port: number; peak: number };
  limitPort: number;
  organization: string;
  token: () => Promise<string>;
  /** Where the generator runs (per core: off the server's CPU). */
  cpuList: string | undefined;
  options: BenchOptions;
  log: (text: string) => void;
}): Promise<HalfLoadLatency> {
  const { gateway, options } = input;
  const rate = Math.round(gateway.peak / 2);
  const result: HalfLoadLatency = {
    gateway: gateway.id,
    rate,
    gatewayRounds: [],
    limitRounds: [],
  };
  const sides = [
    { id: gateway.id, port: gateway.port, rounds: result.gatewayRounds },
    { id: 'limit', port: input.limitPort, rounds: result.limitRounds },
  ];
  for (let round = 1; round <= options.rounds; round++) {
    for (const side of sides) {
      const authorization = `Bearer ${await input.token()}`;
      const spec = {
        url: origin(side.port),
        connections: options.connections,
        durationSeconds: options.roundSeconds,
        overallRate: rate,
        requests: [{ path: automationPath(input.organization), authorization }],
      };
      const r = await runLoad(spec, input.cpuList);
      side.rounds.push(r);
      const bad = r.bad ? ` (not 2xx: ${r.bad})` : '';
      input.log(
        `  at ${rate} req/s ${round}/${options.rounds} ${side.id}: p99 ${r.p99Ms.toFixed(2)} ms${bad}`,
      );
    }
  }
  result.gatewayP99Ms = median(result.gatewayRounds.map((r) => r.p99Ms));
  result.limitP99Ms = median(result.limitRounds.map((r) => r.p99Ms));
  result.addedP99Ms = result.gatewayP99Ms! - result.limitP99Ms!;
  return result;
}
