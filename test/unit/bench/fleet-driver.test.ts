import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driveFleet, type FleetSpec } from '../../../bench/fleet-driver.ts';
import { FLEET_DEFAULTS, planFleet } from '../../../bench/fleet-plan.ts';

/**
 * The driver against a stand-in gateway that records who asked what: it grants a token for
 * the right password, refuses others (429 after the first), and serves the API to the token
 * or the right Basic credentials. What is tested is the driver, not the gateway.
 */
const seen: { address: string; method: string; url: string; authorization?: string }[] = [];
const basicOf = (user: string, password: string) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const RIGHT = basicOf('fleet-user-1', 'right');
let wrong = 0;

function answer(req: IncomingMessage, body: string): [number, object, Record<string, string>?] {
  if (req.url?.endsWith('/token')) {
    const form = new URLSearchParams(body);
    if (form.get('password') === 'right') return [200, { access_token: 'tok-1' }];
    return wrong++ === 0 ? [401, { error: 'invalid_grant' }] : [429, {}, { 'retry-after': '250' }];
  }
  const ok = [RIGHT, 'Bearer tok-1'].includes(req.headers.authorization ?? '');
  return ok ? [200, { data: [] }] : [401, { result: '401-00001' }];
}

let server: Server;
let gateway: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      seen.push({
        address: req.socket.remoteAddress ?? '',
        method: req.method ?? '',
        url: req.url ?? '',
        authorization: req.headers.authorization,
      });
      const [status, json, headers] = answer(req, Buffer.concat(chunks).toString('utf8'));
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(json));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  gateway = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((resolve) => server.close(resolve)));

describe('driveFleet', () => {
  it('logs each job in from its host, calls the API with what it got, and loops the stale job', async () => {
    const options = {
      ...FLEET_DEFAULTS,
      hosts: 2,
      accounts: 1,
      jobs: 4,
      waves: 1,
      staleHosts: 1,
      staleAttempts: 3,
      apiRounds: 1,
    };
    const spec: FleetSpec = {
      gateway,
      organization: 'acme',
      staleOrganization: 'stale',
      options,
      jobs: planFleet(options),
      accounts: [{ username: 'fleet-user-1', password: 'right' }],
      staleAccounts: [{ username: 'stale-user-1', password: 'old' }],
    };
    const outcomes = await driveFleet(spec);

    const right = outcomes.filter((o) => !o.job.account.stale);
    expect(right).toHaveLength(8);
    for (const o of right) {
      expect(o.logins.map((l) => l.status)).toEqual([200]);
      expect(o.api.map((a) => [a.call, a.status])).toEqual([
        ['forwarded', 200],
        ['list', 200],
      ]);
    }
    const [stale] = outcomes.filter((o) => o.job.account.stale);
    expect(stale!.logins.map((l) => [l.status, l.error, l.retryAfter])).toEqual([
      [401, 'invalid_grant', undefined],
      [429, undefined, '250'],
      [429, undefined, '250'],
    ]);
    expect(stale!.api).toEqual([]);

    // Each host's requests came from its own address; tokens and Basic went to the API.
    const from = (address: string) => seen.filter((r) => r.address === address);
    expect(from('127.0.0.20')).toHaveLength(4 * 3 + 3);
    expect(from('127.0.0.21')).toHaveLength(4 * 3);
    const api = seen.filter((r) => r.url.startsWith('/api/acme/'));
    expect(new Set(api.map((r) => r.authorization))).toEqual(new Set(['Bearer tok-1', RIGHT]));
    expect(api.some((r) => r.url === '/api/acme/platform/workspaces')).toBe(true);
    // The driver never hands a token back to the bench.
    expect(JSON.stringify(outcomes)).not.toContain('tok-1');
  });
});
