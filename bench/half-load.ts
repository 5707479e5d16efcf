import { runLoad, type LoadResult } from './load.ts';
import { median } from './stats.ts';
import { automationPath, loadOf } from './scenarios.ts';
import type { BenchOptions } from './settings.ts';

/**
 * The p99 the gateway adds at half of its peak: it and the limit at that steady rate
 * (autocannon's `overallRate`: wrk has none), rounds interleaved, the difference of the medians.
 */
export async function measureHalfLoad(input: {
  gateway: { id: string; port: number; peak: number };
  limitPort: number;
  organization: string;
  token: string;
  /** Where the generator runs (per core: off the server's CPU). */
  cpuList: string | undefined;
  options: BenchOptions;
  log: (text: string) => void;
}) {
  const { gateway, options } = input;
  const rate = Math.round(gateway.peak / 2);
  const sides = [
    { id: gateway.id, port: gateway.port, rounds: [] as LoadResult[] },
    { id: 'limit', port: input.limitPort, rounds: [] as LoadResult[] },
  ];
  const path = automationPath(input.organization);
  const requests = [{ path, authorization: `Bearer ${input.token}` }];
  for (let round = 1; round <= options.rounds; round++) {
    for (const side of sides) {
      const load = { ...loadOf({ port: side.port, requests }, options), overallRate: rate };
      const r = await runLoad(load, input.cpuList);
      side.rounds.push(r);
      const bad = r.bad ? ` (not 2xx: ${r.bad})` : '';
      input.log(
        `  at ${rate} req/s ${round}/${options.rounds} ${side.id}: p99 ${r.p99Ms.toFixed(2)} ms${bad}`,
      );
    }
  }
  const [gatewayP99Ms, limitP99Ms] = sides.map((side) => median(side.rounds.map((r) => r.p99Ms))!);
  const [gatewayRounds, limitRounds] = sides.map((side) => side.rounds);
  const addedP99Ms = gatewayP99Ms! - limitP99Ms!;
  return {
    gateway: gateway.id,
    rate,
    gatewayRounds,
    limitRounds,
    gatewayP99Ms,
    limitP99Ms,
    addedP99Ms,
  };
}
