import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createCanonicalHost, type CanonicalHost } from '../../../src/edge/canonical-host.ts';
import { parseTrustedProxies } from '../../../src/config/trusted-proxies.ts';
import { createForwarding } from '../../../src/edge/forwarding.ts';
import { parseRequestTarget, type RequestTarget } from '../../../src/edge/request-target.ts';
import { canonicalConsolePath } from '../../../src/auth-proxy/console-page.ts';
import { AUTH_ROUTES } from '../../../src/auth-proxy/auth-routes.ts';
import { compileRoutes } from '../../../src/edge/route.ts';

/** The rule as the edge calls it: with the route it read from the target. */
const read = compileRoutes(AUTH_ROUTES);
const routed =
  (rule: CanonicalHost) =>
  (req: IncomingMessage, target: RequestTarget): string | undefined =>
    rule(req, target, read(target.segments, req.method));

function request(
  method: string,
  host: string | undefined,
  headers: Record<string, string> = {},
  peer = '127.0.0.1',
): IncomingMessage {
  return {
    method,
    headers: { ...(host === undefined ? {} : { host }), ...headers },
    socket: { remoteAddress: peer },
  } as unknown as IncomingMessage;
}

function target(url: string): RequestTarget {
  const parsed = parseRequestTarget(url);
  if ('refused' in parsed) throw new Error(parsed.refused);
  return parsed;
}

describe('the admin listener sends console pages to ADMIN_PUBLIC_URL', () => {
  const rule = routed(
    createCanonicalHost({
      origin: 'http://localhost:8001',
      forwarding: createForwarding(parseTrustedProxies('10.0.0.0/8')),
      canonicalPathOf: canonicalConsolePath,
    }),
  );
  const console = '/auth/admin/master/console/';

  it.each([
    ['127.0.0.1:8001', console, `http://localhost:8001${console}`],
    ['myhost:8001', `${console}?x=1`, `http://localhost:8001${console}?x=1`],
    [
      'LOCALHOST:8001',
      '/auth/admin/acme/console',
      'http://localhost:8001/auth/admin/acme/console/',
    ],
    ['localhost:8001', '/auth/admin/master/console', `http://localhost:8001${console}`],
    ['localhost:8001', '/auth/admin/', `http://localhost:8001${console}`],
    // The target never comes from the Host header, whatever it holds.
    ['evil.example', console, `http://localhost:8001${console}`],
    ['evil.example/x?', console, `http://localhost:8001${console}`],
    [undefined, console, `http://localhost:8001${console}`],
  ])('Host %j, GET %s → %s', (host, url, location) => {
    expect(rule(request('GET', host), target(url))).toBe(location);
    expect(rule(request('HEAD', host), target(url))).toBe(location);
  });

  it.each([
    ['localhost:8001', console],
    ['LocalHost:8001', console],
    ['127.0.0.1:8001', '/auth/admin/realms/master/users'],
    ['127.0.0.1:8001', '/auth/realms/master/protocol/openid-connect/token'],
    ['127.0.0.1:8001', '/api/platform/organizations'],
    ['127.0.0.1:8001', '/auth/admin/master/console/whoami'],
  ])('Host %j, GET %s goes on', (host, url) => {
    expect(rule(request('GET', host), target(url))).toBeUndefined();
  });

  it('leaves other methods alone', () => {
    expect(rule(request('POST', '127.0.0.1:8001'), target(console))).toBeUndefined();
  });

  it("believes a trusted proxy's X-Forwarded-Host, and only a trusted proxy's", () => {
    const viaProxy = request(
      'GET',
      'internal:8001',
      { 'x-forwarded-host': 'localhost:8001' },
      '10.1.2.3',
    );
    expect(rule(viaProxy, target(console))).toBeUndefined();
    const direct = request('GET', '127.0.0.1:8001', { 'x-forwarded-host': 'localhost:8001' });
    expect(rule(direct, target(console))).toBe(`http://localhost:8001${console}`);
  });

  it('treats the default port as no port', () => {
    const https = routed(
      createCanonicalHost({
        origin: 'https://admin.example',
        forwarding: createForwarding(undefined),
        canonicalPathOf: canonicalConsolePath,
      }),
    );
    expect(https(request('GET', 'admin.example:443'), target(console))).toBeUndefined();
    expect(https(request('GET', 'admin.example:8443'), target(console))).toBe(
      `https://admin.example${console}`,
    );
  });
});
