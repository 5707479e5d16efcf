import { runToCompletion } from './processes.ts';

/** One request shape: a path on the target and its `Authorization` header, if any. */
export interface LoadRequest {
  path: string;
  authorization?: string;
}

/** What one load-generator process runs (see load.ts). */
export interface LoadSpec {
  /** Origin of the target, e.g. `http://127.0.0.1:28000`. */
  url: string;
  connections: number;
  durationSeconds?: number;
  /** Stop after this many requests instead (takes precedence over the duration). */
  amount?: number;
  /** One entry: always the same request. Several: taken in turn by all connections together. */
  requests: LoadRequest[];
}

/** Evenly spaced requests at a fixed rate, to several targets in turn (see paced.ts). */
export interface PacedSpec {
  /** One request each: its origin, path and `Authorization` header. */
  targets: (LoadRequest & { url: string })[];
  /** Requests per second over all targets together. */
  overallRate: number;
  /** Keep-alive connections per target, at most. */
  connections: number;
  durationSeconds: number;
}

export interface LoadResult {
  url: string;
  durationSeconds: number;
  /** 2xx answers. */
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  /** 2xx answers per second. */
  reqPerSec: number;
  /** Of 2xx answers, in milliseconds. */
  latencyMs: { p50: number; p90: number; p99: number; max: number; mean: number };
}

/**
 * Runs one measurement in a fresh load-generator process and returns its result; `cpuList`
 * keeps the generator on those CPUs (paired rounds).
 */
export async function runLoad(spec: LoadSpec, cpuList?: string): Promise<LoadResult> {
  const seconds = spec.durationSeconds ?? 10;
  const stdout = await runToCompletion({
    module: 'load.ts',
    input: JSON.stringify(spec),
    timeoutMs: (spec.amount ? 300 : seconds + 60) * 1000,
    cpuList,
  });
  return JSON.parse(stdout) as LoadResult;
}

/** Runs paced load in a fresh generator process; one result per target, in their order. */
export async function runPaced(spec: PacedSpec): Promise<LoadResult[]> {
  const stdout = await runToCompletion({
    module: 'paced.ts',
    input: JSON.stringify(spec),
    timeoutMs: (spec.durationSeconds + 60) * 1000,
  });
  return JSON.parse(stdout) as LoadResult[];
}

/** A LoadResult from the latencies (ms) of 2xx answers and the status counts. */
export function summarise(input: {
  url: string;
  durationSeconds: number;
  latencies: number[];
  statusCodes: Record<string, number>;
  errors: number;
  timeouts: number;
}): LoadResult {
  const sorted = [...input.latencies].sort((a, b) => a - b);
  const ok = sorted.length;
  const total = Object.values(input.statusCodes).reduce((sum, n) => sum + n, 0);
  return {
    url: input.url,
    durationSeconds: input.durationSeconds,
    ok,
    non2xx: total - ok,
    errors: input.errors,
    timeouts: input.timeouts,
    statusCodes: input.statusCodes,
    reqPerSec: input.durationSeconds > 0 ? ok / input.durationSeconds : 0,
    latencyMs: {
      p50: percentile(sorted, 50),
      p90: percentile(sorted, 90),
      p99: percentile(sorted, 99),
      max: sorted[ok - 1] ?? 0,
      mean: ok > 0 ? sorted.reduce((sum, v) => sum + v, 0) / ok : 0,
    },
  };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.ceil((p / 100) * sorted.length) - 1;
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank))]!;
}

/** All of stdin, as text (how a load process gets its LoadSpec). */
export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
