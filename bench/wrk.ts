import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The side-by-side rows' generator: wrk (C), so a server faster than Node is not capped by it. */
export interface WrkSpec {
  url: string;
  authorization: string;
  connections: number;
  threads: number;
  seconds: number;
  cpuList?: string;
}
export type WrkResult = ReturnType<typeof parseWrk>;

export async function runWrk(spec: WrkSpec): Promise<WrkResult> {
  const wrk = [
    'wrk',
    `--threads=${spec.threads}`,
    `--connections=${spec.connections}`,
    `--duration=${spec.seconds}s`,
    '--timeout=10s',
    '--latency',
    '--header',
    `Authorization: ${spec.authorization}`,
    spec.url,
  ];
  const [command, ...args] = spec.cpuList ? ['taskset', '--cpu-list', spec.cpuList, ...wrk] : wrk;
  const { stdout } = await run(command!, args, { timeout: (spec.seconds + 30) * 1000 });
  return parseWrk(stdout);
}

const MS_PER = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
/** `812.00us`, `3.21ms`, `1.02s`, `2m` in milliseconds. */
function milliseconds(value: string, unit: string): number {
  const factor = MS_PER[unit as keyof typeof MS_PER];
  if (factor === undefined) throw new Error(`wrk: unknown time unit ${unit}`);
  return Number(value) * factor;
}

/** wrk's report: good answers per second (no server here sends 3xx), failures, p50 and p99. */
export function parseWrk(text: string) {
  const total = /(\d+) requests in ([\d.]+)(us|ms|s|m|h),/.exec(text);
  if (!total) throw new Error(`wrk: no request count in its output:\n${text}`);
  const requests = Number(total[1]);
  const seconds = milliseconds(total[2]!, total[3]!) / 1000;
  const notGood = Number(/Non-2xx or 3xx responses: (\d+)/.exec(text)?.[1] ?? 0);
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text);
  const socketErrors = socket ? socket.slice(1).reduce((sum, n) => sum + Number(n), 0) : 0;
  const percentile = (p: number) => {
    const found = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s|m|h)\\s*$`, 'm').exec(text);
    return found ? milliseconds(found[1]!, found[2]!) : undefined;
  };
  const ok = requests - notGood;
  return {
    reqPerSec: seconds > 0 ? ok / seconds : 0,
    ok,
    bad: notGood + socketErrors,
    p50Ms: percentile(50),
    p99Ms: percentile(99),
  };
}
