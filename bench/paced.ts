import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { readStdin, summarise, type LoadResult, type PacedSpec } from './load-spec.ts';

/**
 * A paced load generator for latency at a fixed rate: requests are sent at evenly spaced
 * moments (`overallRate` per second in all) and go to the targets in turn (request i to target
 * i mod n), each target over at most `connections` keep-alive connections, never waiting for
 * answers to send more. Because the targets alternate request by request, a stall of the shared
 * machine or of this process delays them alike, and their latencies can be compared although
 * the stalls themselves are far larger than the differences measured.
 *
 * Each latency is counted from the moment the request was handed to node:http, so time spent
 * waiting for a free connection counts too (no coordinated omission). Not from the moment it
 * was due: this loop wakes about once a millisecond, and that lateness is the generator's own,
 * the same whatever the target (against the bare upstream at 3,864 req/s: p50 1.6 ms counted
 * from the due moment, 0.45 ms from the send), and would drown the differences measured.
 * autocannon's own rate limit is a per-second quota per connection: connections fire at full
 * speed at the start of each second and then idle, so its "half load" has the queueing of full
 * load.
 *
 * Reads a PacedSpec on stdin and prints one LoadResult per target (a JSON array) on stdout; the
 * first second is a warm-up (connections opening) and is not counted.
 */
const spec = JSON.parse(await readStdin()) as PacedSpec;
if (spec.overallRate <= 0 || spec.targets.length === 0) {
  throw new Error('paced load needs a rate and at least one target');
}
const warmupMs = 1000;
const durationMs = spec.durationSeconds * 1000;
const intervalMs = 1000 / spec.overallRate;

interface Target {
  url: URL;
  path: string;
  headers: Record<string, string>;
  agent: Agent;
  /** Of 2xx answers, in milliseconds. */
  latencies: number[];
  statusCodes: Record<string, number>;
  errors: number;
  outstanding: number;
}

const targets = spec.targets.map((t): Target => ({
  url: new URL(t.url),
  path: t.path,
  headers: t.authorization ? { authorization: t.authorization } : {},
  agent: new Agent({ keepAlive: true, maxSockets: spec.connections }),
  latencies: [],
  statusCodes: {},
  errors: 0,
  outstanding: 0,
}));

let sent = 0;
const start = performance.now();
while (performance.now() - start < warmupMs + durationMs) {
  const due = Math.floor((performance.now() - start) / intervalMs);
  for (; sent < due; sent++) fire(sent);
  await sleep(1);
}
const deadline = performance.now() + 10_000;
while (targets.some((t) => t.outstanding > 0) && performance.now() < deadline) await sleep(5);

const results: LoadResult[] = targets.map((t) => {
  t.agent.destroy();
  return summarise({
    url: `${t.url.origin}${t.path}`,
    durationSeconds: durationMs / 1000,
    latencies: t.latencies,
    statusCodes: t.statusCodes,
    errors: t.errors,
    timeouts: t.outstanding,
  });
});
process.stdout.write(`${JSON.stringify(results)}\n`);

function fire(index: number): void {
  const target = targets[index % targets.length]!;
  const counted = index * intervalMs >= warmupMs;
  const sentAt = performance.now();
  target.outstanding++;
  const req = request(
    {
      agent: target.agent,
      host: target.url.hostname,
      port: target.url.port,
      path: target.path,
      headers: target.headers,
    },
    (res) => {
      res.resume();
      res.on('end', () => {
        target.outstanding--;
        if (!counted) return;
        const status = res.statusCode ?? 0;
        target.statusCodes[status] = (target.statusCodes[status] ?? 0) + 1;
        if (status >= 200 && status < 300) target.latencies.push(performance.now() - sentAt);
      });
    },
  );
  req.on('error', () => {
    target.outstanding--;
    if (counted) target.errors++;
  });
  req.end();
}
