import autocannon from 'autocannon';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { proofPool, proofsFor, type ProofSpec } from './dpop-proofs.ts';
import { runToCompletion } from './processes.ts';
import { percentile } from './stats.ts';

/**
 * The load generator: autocannon in a process of its own. As a program: a LoadSpec line on
 * stdin, prepare (sign DPoP proofs), `{"prepared":true}`, start when stdin ends, a LoadResult.
 */
export type LoadRequest = {
  path: string;
  authorization?: string;
  /** A form POST instead of a GET (the token endpoint). */
  form?: string;
  /** A fresh DPoP proof of this key for this request on every request (dpop-proofs.ts). */
  dpop?: ProofSpec;
};
export type LoadResult = Awaited<ReturnType<typeof generate>>;
type Generator = { prepared: Promise<void>; go: () => void; result: Promise<LoadResult> };
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

/** One measurement in a fresh generator process; `stop` ends it early (the result until then). */
export async function runLoad(
  spec: LoadSpec,
  cpuList?: string,
  stop?: AbortSignal,
): Promise<LoadResult> {
  const generator = startGenerator(spec, cpuList, stop);
  generator.go();
  return generator.result;
}

/** Measurements at once, a generator each: all prepare (sign DPoP proofs), then start together. */
export async function runTogether(specs: LoadSpec[], cpuList?: string): Promise<LoadResult[]> {
  const generators = specs.map((spec) => startGenerator(spec, cpuList));
  // A generator that failed to prepare rejects its result: release the others, then throw.
  await Promise.race([
    Promise.all(generators.map((g) => g.prepared)),
    Promise.all(generators.map((g) => g.result)),
  ]).finally(() => generators.forEach((g) => g.go()));
  return Promise.all(generators.map((g) => g.result));
}

function startGenerator(spec: LoadSpec, cpuList?: string, stop?: AbortSignal): Generator {
  // Signing a round's proofs takes seconds on a loaded machine: allowed for in the time-out.
  const timeoutMs = (spec.amount ? 300 : spec.durationSeconds + 120) * 1000;
  let go!: () => void;
  let prepared!: () => void;
  const started = new Promise<void>((resolve) => (go = resolve));
  const ready = new Promise<void>((resolve) => (prepared = resolve));
  const hold = { started, onLine: (line: string) => line === PREPARED && prepared() };
  const output = runToCompletion(
    'load.ts',
    `${JSON.stringify(spec)}\n`,
    timeoutMs,
    cpuList,
    hold,
    stop,
  );
  const result = output.then((text) => JSON.parse(text.trim().split('\n').pop()!) as LoadResult);
  return { prepared: ready, go, result };
}
const PREPARED = '{"prepared":true}';

async function generate(
  spec: LoadSpec,
  pools: (string[] | undefined)[],
  preparedAt: number,
  go: Promise<void>,
) {
  const headers = (r: LoadRequest) => ({
    ...(r.authorization ? { authorization: r.authorization } : {}),
    ...(r.form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
  });
  const body = (r: LoadRequest) => (r.form ? { method: 'POST' as const, body: r.form } : {});
  let next = 0;
  let instance: autocannon.Instance | undefined;
  let proofsRanOut = false;
  /** The next unused proof of request `index`'s pool; the round stops when the pool is used up. */
  const proofOf = (index: number) => {
    const proof = pools[index]!.pop();
    if (proof !== undefined) return { dpop: proof };
    proofsRanOut = true;
    instance?.stop();
    return {};
  };
  const rotate: autocannon.Request = {
    setupRequest(request) {
      const index = next++ % spec.requests.length;
      const chosen = spec.requests[index]!;
      return {
        ...request,
        ...body(chosen),
        path: chosen.path,
        headers: { ...request.headers, ...headers(chosen), ...(chosen.dpop && proofOf(index)) },
      };
    },
  };
  const [first] = spec.requests;
  const dynamic = spec.requests.length > 1 || first?.dpop !== undefined;
  await go;
  // Each proof must reach the gateway inside its window (60 s by default) after its making.
  const oldestProofSeconds = (Date.now() - preparedAt) / 1000 + spec.durationSeconds;
  if (pools.some(Boolean) && oldestProofSeconds > 50) {
    throw new Error(`DPoP proofs would be ${oldestProofSeconds.toFixed(0)} s old by the end`);
  }
  const latencies: number[] = [];
  const statusCodes: Record<string, number> = {};
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const running = autocannon(
      {
        url: spec.url,
        connections: spec.connections,
        duration: spec.durationSeconds,
        amount: spec.amount,
        overallRate: spec.overallRate,
        timeout: 20,
        requests: [dynamic ? rotate : { ...first!, ...body(first!), headers: headers(first!) }],
      },
      (err: Error | null, done: autocannon.Result) => (err ? reject(err) : resolve(done)),
    );
    instance = running;
    // runLoad's `stop`: the run ends now and reports as at the end of its duration.
    process.once('SIGTERM', () => running.stop());
    // Per-response times have sub-millisecond precision; autocannon's histogram has 1 ms steps.
    running.on('response', (_client, status, _bytes, responseTime) => {
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
    /** A DPoP row's pool was used up before the round's end: the round stopped early. */
    proofsRanOut,
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  // The spec is the first line; the end of stdin is the signal to start.
  const input = createInterface({ input: process.stdin });
  const go = new Promise<void>((resolve) => input.once('close', resolve));
  const line = await new Promise<string>((resolve) => input.once('line', resolve));
  const spec = JSON.parse(line) as LoadSpec;
  const startedAt = Date.now();
  // Each DPoP request's proofs for the run (`amount`, or the most its duration uses), signed now.
  const count = spec.amount ?? proofsFor(spec.durationSeconds);
  const pools = spec.requests.map((r) => (r.dpop ? proofPool(r.dpop, count) : undefined));
  process.stdout.write(`${PREPARED}\n`);
  const result = await generate(spec, pools, startedAt, go);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
