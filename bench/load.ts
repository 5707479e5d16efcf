import autocannon from 'autocannon';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runToCompletion } from './processes.ts';
import { percentile } from './stats.ts';

/**
 * The load generator: one autocannon run in a process of its own (never a gateway's). Run as a
 * program, this module reads a LoadSpec on stdin and prints a LoadResult; `runLoad` starts it.
 */
export type LoadRequest = {
  path: string;
  authorization?: string;
  /** A form POST instead of a GET (the token endpoint). */
  form?: string;
};
export type LoadResult = Awaited<ReturnType<typeof generate>>;
export interface LoadSpec {
  url: string;
  connections: number;
  durationSeconds: number;
  /** Stop after this many requests instead (one pass over many tokens). */
  amount?: number;
  /** Requests per second over all connections together: a steady load instead of the most. */
  overallRate?: number;
  /** Several: taken in turn by all connections together (one shared cursor). */
  requests: LoadRequest[];
}

/**
 * One measurement in a fresh generator process, on `cpuList` if given (paired rounds). `stop`,
 * when it aborts, ends the load before its duration: the result covers the time until then.
 */
export async function runLoad(
  spec: LoadSpec,
  cpuList?: string,
  stop?: AbortSignal,
): Promise<LoadResult> {
  const timeoutMs = (spec.amount ? 300 : spec.durationSeconds + 60) * 1000;
  return JSON.parse(
    await runToCompletion('load.ts', JSON.stringify(spec), timeoutMs, cpuList, stop),
  ) as LoadResult;
}

async function generate(spec: LoadSpec) {
  const headers = (r: LoadRequest) => ({
    ...(r.authorization ? { authorization: r.authorization } : {}),
    ...(r.form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
  });
  const body = (r: LoadRequest) => (r.form ? { method: 'POST' as const, body: r.form } : {});
  let next = 0;
  const rotate: autocannon.Request = {
    setupRequest(request) {
      const chosen = spec.requests[next++ % spec.requests.length]!;
      return {
        ...request,
        ...body(chosen),
        path: chosen.path,
        headers: { ...request.headers, ...headers(chosen) },
      };
    },
  };
  const [first] = spec.requests;
  const latencies: number[] = [];
  const statusCodes: Record<string, number> = {};
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: spec.url,
        connections: spec.connections,
        duration: spec.durationSeconds,
        amount: spec.amount,
        overallRate: spec.overallRate,
        timeout: 20,
        requests: [
          spec.requests.length > 1
            ? rotate
            : { ...first!, ...body(first!), headers: headers(first!) },
        ],
      },
      (err: Error | null, done: autocannon.Result) => (err ? reject(err) : resolve(done)),
    );
    // runLoad's `stop`: the run ends now and reports as at the end of its duration.
    process.once('SIGTERM', () => instance.stop());
    // Per-response times have sub-millisecond precision; autocannon's histogram has 1 ms steps.
    instance.on('response', (_client, status, _bytes, responseTime) => {
      statusCodes[status] = (statusCodes[status] ?? 0) + 1;
      if (status >= 200 && status < 300) latencies.push(responseTime);
    });
  });
  latencies.sort((a, b) => a - b);
  const answers = Object.values(statusCodes).reduce((sum, n) => sum + n, 0);
  return {
    /** 2xx answers per second; everything else (errors include time-outs) is `bad`. */
    reqPerSec: result.duration > 0 ? latencies.length / result.duration : 0,
    ok: latencies.length,
    bad: answers - latencies.length + result.errors,
    statusCodes,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const spec = JSON.parse(Buffer.concat(chunks).toString('utf8')) as LoadSpec;
  process.stdout.write(`${JSON.stringify(await generate(spec))}\n`);
}
