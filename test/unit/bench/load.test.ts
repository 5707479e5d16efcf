import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLoad } from '../../../bench/load.ts';

/* The load generator's early end (runLoad's `stop`), against a server on this machine. */

let server: Server;
let url: string;

beforeAll(async () => {
  server = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
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
    setTimeout(() => stop.abort(), 2000);
    const result = await load;
    const seconds = (performance.now() - started) / 1000;
    expect(seconds).toBeGreaterThanOrEqual(2);
    expect(seconds).toBeLessThan(20);
    expect(result.bad).toBe(0);
    expect(result.ok).toBeGreaterThan(50);
    expect(result.statusCodes).toEqual({ 200: result.ok });
  }, 30_000);
});
