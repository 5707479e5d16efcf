import type { Server } from 'node:http';
import {
  createServer as createTcpServer,
  type AddressInfo,
  type Server as TcpServer,
} from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Admission } from '../../../src/auth/admission.ts';
import { createForwardRoute, FORWARDED_ROUTE } from '../../../src/automation/forward-route.ts';
import { createForwarder } from '../../../src/automation/forwarder.ts';
import { createEdge } from '../../../src/edge/edge.ts';
import { createForwarding } from '../../../src/edge/forwarding.ts';
import { compileRoutes } from '../../../src/edge/route.ts';
import { createLogger } from '../../../src/http/logger.ts';
import { metricsOff } from '../../../src/metrics/metrics.ts';
import { listen } from '../../../src/server.ts';
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
    const logger = createLogger('silent');
    const admission: Admission = { admit: () => principal };
    const forwarded = createForwardRoute({
      admission,
      forward: createForwarder({
        upstreamUrl,
        timeoutMs: 5000,
        answerDeadlineMs: 300_000,
        forwarding: createForwarding(undefined),
        logger,
        metrics: { proxyFailure: (upstream, cause) => counted.push(`${upstream} ${cause}`) },
      }),
      logger,
    });
    const edge = createEdge({
      logger,
      app: () => {
        throw new Error('express is not reached in this test');
      },
      routes: compileRoutes([FORWARDED_ROUTE]),
      forwarded,
      metrics: metricsOff,
    });
    const gateway = await listen(edge, '127.0.0.1', 0, logger);
    gateways.push(gateway);
    return `http://127.0.0.1:${(gateway.address() as AddressInfo).port}/api/acme/workspaces/ws1/ita/x`;
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
