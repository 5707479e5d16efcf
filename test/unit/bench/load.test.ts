import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runLoad } from '../../../bench/load.ts';

/* The load generator in its own process, against a server on this machine. */

let server: Server;
let url: string;
const paths: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    paths.push(req.url ?? '');
    res.statusCode = req.url === '/refused' ? 401 : 200;
    res.end('ok');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe('runLoad', () => {
  it('sends its requests in turn at the steady rate asked, and counts only 2xx answers as served', async () => {
    const result = await runLoad({
      url,
      connections: 2,
      durationSeconds: 2,
      overallRate: 100,
      requests: [{ path: '/a' }, { path: '/b' }, { path: '/refused' }],
    });
    expect(result.statusCodes[200]).toBe(result.ok);
    expect(result.bad).toBe(result.statusCodes[401]);
    // In turn: a third of the answers are the refused path's, give or take the last ones.
    expect(Math.abs(result.ok - 2 * result.bad)).toBeLessThanOrEqual(2);
    expect(result.ok + result.bad).toBeGreaterThan(20);
    expect(result.ok + result.bad).toBeLessThanOrEqual(paths.length);
    expect(new Set(paths)).toEqual(new Set(['/a', '/b', '/refused']));
    expect(result.reqPerSec).toBeGreaterThan(0);
    expect(result.p99Ms).toBeGreaterThanOrEqual(result.p50Ms);
  }, 30_000);
});
