import type { Server } from 'node:http';
import {
  createServer as createTcpServer,
  type AddressInfo,
  type Server as TcpServer,
} from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FORWARDED_PATH, startForwardedGateway } from '../../helpers/forwarded-gateway.ts';
import { testPrincipal } from '../../helpers/principal.ts';
import { listenLocally, refusingBaseUrl } from '../../helpers/local-server.ts';

const principal = testPrincipal({
  userId: 'user-1',
  clientRoles: { 'acme-workspaces': ['ws1'] },
  locale: 'en',
  sessionId: undefined,
  issuedAt: 0,
  expiresAt: Number.MAX_SAFE_INTEGER,
});

/**
 * What a client of the forwarded route gets when the automation service cannot be reached, by
 * the way it cannot: the gateway's own forwarder and edge, an admission that admits at once (no
 * Keycloak: the failure is the upstream's alone).
 */
describe('the forwarded route when the automation service is out of reach', () => {
  const gateways: Server[] = [];
  let resetting: TcpServer;
  /** What the forwarder counted, as `upstream cause`. */
  const counted: string[] = [];

  /** The forwarded route's URL on a gateway whose automation service is `upstreamUrl`. */
  async function gatewayTo(upstreamUrl: string): Promise<string> {
    const { server, base } = await startForwardedGateway({
      upstreamUrl,
      admission: { admit: () => principal, challenged: (err) => err },
      metrics: { proxyFailure: (upstream, cause) => counted.push(`${upstream} ${cause}`) },
    });
    gateways.push(server);
    return `${base}${FORWARDED_PATH}`;
  }

  beforeAll(async () => {
    // Reads the request, then resets the connection: the service was reached, and failed.
    resetting = createTcpServer((socket) => {
      socket.on('error', () => {});
      socket.once('data', () => socket.resetAndDestroy());
    });
    await listenLocally(resetting);
  });

  afterAll(async () => {
    for (const gateway of gateways) await new Promise((resolve) => gateway.close(resolve));
    await new Promise((resolve) => resetting?.close(resolve));
  });

  it.each([
    ['refuses connections', () => refusingBaseUrl(), 'refused'],
    // RFC 6761: `.invalid` never resolves, as a stopped compose service's name no longer does.
    [
      'has a name that does not resolve',
      () => Promise.resolve('http://automation.invalid:8080'),
      'unreachable',
    ],
  ])(
    'answers 503 503-00002 with Retry-After when it %s: nothing reached it',
    async (_how, url, cause) => {
      counted.length = 0;
      const answer = await fetch(await gatewayTo(await url()));
      expect(counted).toEqual([`automation ${cause}`]);
      expect(answer.status).toBe(503);
      expect(answer.headers.get('retry-after')).toBe('5');
      expect(answer.headers.get('x-request-id')).toBeTruthy();
      expect(await answer.json()).toMatchObject({ data: null, result: '503-00002' });
    },
  );

  it('answers 502 502-00001 when it reset the connection after reading the request', async () => {
    const { port } = resetting.address() as AddressInfo;
    counted.length = 0;
    const answer = await fetch(await gatewayTo(`http://127.0.0.1:${port}`));
    expect(counted).toEqual(['automation reset']);
    expect(answer.status).toBe(502);
    expect(await answer.json()).toMatchObject({ data: null, result: '502-00001' });
  });
});
