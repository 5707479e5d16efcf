import autocannon from 'autocannon';
import { readStdin, summarise, type LoadSpec } from './load-spec.ts';

/**
 * The load generator: one autocannon run, in a process of its own (never the gateway's). Reads
 * a LoadSpec as JSON on stdin, prints a LoadResult as JSON on stdout.
 *
 * Latency is taken from autocannon's per-response `responseTime` (milliseconds with
 * sub-millisecond precision) rather than its histogram, which has 1 ms resolution; only 2xx
 * answers count, as in autocannon's own figures.
 */
const spec = JSON.parse(await readStdin()) as LoadSpec;
const target = new URL(spec.url);
const first = spec.requests[0];
if (!first) throw new Error('a load spec needs at least one request');

let next = 0;
const rotate = spec.requests.length > 1;
let finish: (result: autocannon.Result) => void = () => undefined;
let fail: (err: unknown) => void = () => undefined;
const finished = new Promise<autocannon.Result>((resolve, reject) => {
  finish = resolve;
  fail = reject;
});
const options: autocannon.Options = {
  url: spec.url,
  connections: spec.connections,
  duration: spec.durationSeconds ?? 10,
  amount: spec.amount,
  timeout: 20,
  requests: [
    rotate
      ? {
          method: 'GET',
          // One shared cursor: every connection takes the next credential, so all are used.
          setupRequest(request) {
            const chosen = spec.requests[next++ % spec.requests.length]!;
            request.path = chosen.path;
            request.headers = { ...request.headers, ...headersOf(chosen.authorization) };
            return request;
          },
        }
      : { method: 'GET', path: first.path, headers: headersOf(first.authorization) },
  ],
};
const instance = autocannon(options, (err: unknown, result: autocannon.Result) => {
  if (err) fail(err);
  else finish(result);
});

const latencies: number[] = [];
const statusCodes: Record<string, number> = {};
instance.on('response', (_client, statusCode, _bytes, responseTime) => {
  statusCodes[statusCode] = (statusCodes[statusCode] ?? 0) + 1;
  if (statusCode >= 200 && statusCode < 300) latencies.push(responseTime);
});

const result = await finished;

process.stdout.write(
  `${JSON.stringify(
    summarise({
      url: `${target.origin}${first.path}`,
      durationSeconds: result.duration,
      latencies,
      statusCodes,
      errors: result.errors,
      timeouts: result.timeouts,
    }),
  )}\n`,
);

function headersOf(authorization: string | undefined): Record<string, string> {
  return authorization ? { authorization } : {};
}
