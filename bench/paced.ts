import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { readStdin, summarise, type LoadSpec } from './load-spec.ts';

/**
 * A paced load generator for latency at a fixed rate: requests are sent at evenly spaced
 * moments (`overallRate` per second) over at most `connections` keep-alive connections, and
 * each latency is counted from the moment the request was due, so time spent waiting for a
 * free connection counts too (no coordinated omission). autocannon's own rate limit is a
 * per-second quota per connection: connections fire at full speed at the start of each second
 * and then idle, so its "half load" has the queueing of full load.
 *
 * Reads a LoadSpec (with `overallRate`) on stdin and prints a LoadResult on stdout; the first
 * second is a warm-up (connections opening) and is not counted.
 */
const spec = JSON.parse(await readStdin()) as LoadSpec;
const rate = spec.overallRate ?? 0;
if (rate <= 0) throw new Error('paced load needs overallRate');
const target = new URL(spec.url);
const agent = new Agent({ keepAlive: true, maxSockets: spec.connections });
const warmupMs = 1000;
const durationMs = (spec.durationSeconds ?? 10) * 1000;
const intervalMs = 1000 / rate;

const latencies: number[] = [];
const statusCodes: Record<string, number> = {};
let errors = 0;
let outstanding = 0;
let sent = 0;
const start = performance.now();

while (performance.now() - start < warmupMs + durationMs) {
  const due = Math.floor((performance.now() - start) / intervalMs);
  for (; sent < due; sent++) fire(start + sent * intervalMs);
  await sleep(1);
}
const deadline = performance.now() + 10_000;
while (outstanding > 0 && performance.now() < deadline) await sleep(5);
agent.destroy();

process.stdout.write(
  `${JSON.stringify(
    summarise({
      url: `${target.origin}${spec.requests[0]?.path ?? ''}`,
      durationSeconds: durationMs / 1000,
      latencies,
      statusCodes,
      errors,
      timeouts: outstanding,
    }),
  )}\n`,
);

function fire(dueAt: number): void {
  const chosen = spec.requests[sent % spec.requests.length]!;
  const counted = dueAt - start >= warmupMs;
  outstanding++;
  const req = request(
    {
      agent,
      host: target.hostname,
      port: target.port,
      path: chosen.path,
      headers: chosen.authorization ? { authorization: chosen.authorization } : {},
    },
    (res) => {
      res.resume();
      res.on('end', () => {
        outstanding--;
        if (!counted) return;
        const status = res.statusCode ?? 0;
        statusCodes[status] = (statusCodes[status] ?? 0) + 1;
        if (status >= 200 && status < 300) latencies.push(performance.now() - dueAt);
      });
    },
  );
  req.on('error', () => {
    outstanding--;
    if (counted) errors++;
  });
  req.end();
}
