import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLoad } from '../../../bench/load.ts';
import { closeServers, listenLocally } from '../../helpers/local-server.ts';

/* The load generator's early end (runLoad's `stop`), against a server on this machine. */

let server: Server;
let url: string;
/** Called with the number of requests the server has answered, after each. */
let onAnswered = (_count: number) => {};
let answered = 0;

beforeAll(async () => {
  server = createServer((_req, res) => {
    res.end('ok');
    onAnswered(++answered);
  });
  url = await listenLocally(server);
});

afterAll(async () => {
  await closeServers(server);
});

describe('runLoad', () => {
  it('ends when `stop` aborts, long before its duration, and reports what it sent', async () => {
    const stop = new AbortController();
    const started = performance.now();
    const load = runLoad(
      {
        url,
        connections: 2,
        durationSeconds: 120,
        overallRate: 100,
        requests: [{ path: '/a' }, { path: '/b' }],
      },
      undefined,
      stop.signal,
    );
    // Stopped once the server has answered 60 requests (0.6 s at this rate), not after 120 s.
    onAnswered = (count) => count >= 60 && stop.abort();
    const result = await load;
    const seconds = (performance.now() - started) / 1000;
    expect(seconds).toBeLessThan(20);
    expect(result.bad).toBe(0);
    expect(result.ok).toBeGreaterThan(50);
    expect(result.statusCodes).toEqual({ 200: result.ok });
  }, 30_000);
});
