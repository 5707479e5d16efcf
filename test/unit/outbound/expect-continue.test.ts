import { request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuthProxy } from '../../../src/auth-proxy/auth-proxy.ts';
import { createForwarding } from '../../../src/edge/forwarding.ts';
import { createLogger } from '../../../src/http/logger.ts';
import { createKeycloakNodes } from '../../../src/keycloak/keycloak-nodes.ts';
import { FORWARDED_PATH, startForwardedGateway } from '../../helpers/forwarded-gateway.ts';
import { testPrincipal } from '../../helpers/principal.ts';
import { closeServers, listenLocally } from '../../helpers/local-server.ts';

/** Larger than every socket buffer on the way: the client is still sending when answered. */
const BODY = Buffer.alloc(8 * 1024 * 1024, 'x');

/** How the upstream answers: the test sets it per case. */
let answer: (req: IncomingMessage, res: ServerResponse) => void;

interface Answer {
  interim: number[];
  status: number;
  body: string;
}

/**
 * A real client's `Expect: 100-continue`: the head alone, the body once `100 Continue` comes,
 * then the final answer read whole. Resolves once the answer has ended and the body is sent
 * whole: a gateway that stopped reading it would leave the client's upload (and its
 * connection) hanging.
 */
function postExpecting(url: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const interim: number[] = [];
    const req = request(url, {
      method: 'POST',
      headers: {
        expect: '100-continue',
        'content-type': 'application/x-www-form-urlencoded',
        'content-length': String(BODY.length),
      },
    });
    req.on('information', (info) => interim.push(info.statusCode));
    req.on('continue', () => req.end(BODY));
    const sent = new Promise((done) => req.once('finish', done));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const got = { interim, status: res.statusCode!, body: Buffer.concat(chunks).toString() };
        void sent.then(() => resolve(got));
      });
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

/** Reads the whole body, then answers 200 with its length. */
function readThenAnswer(req: IncomingMessage, res: ServerResponse): void {
  let length = 0;
  req.on('data', (chunk: Buffer) => (length += chunk.length));
  req.on('end', () => res.end(`read ${length}`));
}

/**
 * `Expect: 100-continue` with a large body through both proxies, as undici lets them pass it: the
 * gateway answers the expectation itself and drops it, so whatever the upstream does, the client
 * gets a final answer and the gateway neither hangs nor answers 500.
 */
describe('Expect: 100-continue with a large body, through /auth and the forwarded route', () => {
  let upstream: Server;
  let upstreamUrl: string;
  const gateways: Server[] = [];
  const logger = createLogger('silent');
  const routes: Record<string, string> = {};

  beforeAll(async () => {
    upstream = createServer((req, res) => answer(req, res));
    upstreamUrl = await listenLocally(upstream);

    const principal = testPrincipal({
      userId: 'user-1',
      clientRoles: { 'acme-workspaces': ['ws1'] },
      sessionId: undefined,
      issuedAt: 0,
      expiresAt: Number.MAX_SAFE_INTEGER,
    });
    const app = express();
    app.use(
      '/auth',
      createAuthProxy({
        nodes: createKeycloakNodes({ urls: [`${upstreamUrl}/auth`], timeoutMs: 5000 }),
        publicUrl: 'http://gateway.test',
        timeoutMs: 5000,
        answerDeadlineMs: 300_000,
        forwarding: createForwarding(undefined),
        logger,
      }),
    );
    const { server: gateway, base } = await startForwardedGateway({
      upstreamUrl,
      admission: { admit: () => principal, challenged: (err) => err },
      app,
    });
    gateways.push(gateway);
    routes['/auth'] = `${base}/auth/realms/acme/protocol/openid-connect/token`;
    routes.forwarded = `${base}${FORWARDED_PATH}`;
  });

  afterAll(async () => {
    await closeServers(...gateways, upstream);
  });

  it.each(['/auth', 'forwarded'])(
    '%s: the gateway answers 100 Continue itself, the upstream gets the whole body and answers',
    async (route) => {
      // Node's own server answers `100 Continue` to an `Expect: 100-continue` it gets.
      const expectations: (string | undefined)[] = [];
      answer = (req, res) => {
        expectations.push(req.headers.expect);
        readThenAnswer(req, res);
      };
      const got = await postExpecting(routes[route]!);
      expect(got.interim).toEqual([100]);
      expect({ status: got.status, body: got.body }).toEqual({
        status: 200,
        body: `read ${BODY.length}`,
      });
      // Answered by the gateway: undici refuses to send an `Expect` (a 100 it did not ask for
      // is a bad answer, forward.ts `UpstreamUnaskedInterim`).
      expect(expectations).toEqual([undefined]);
    },
  );

  it.each([
    ['/auth', 401],
    ['/auth', 417],
    ['forwarded', 401],
    ['forwarded', 417],
  ])(
    '%s: the upstream answers %i at once, reading nothing: the client gets it',
    async (route, status) => {
      answer = (_req, res) => res.writeHead(status, { 'content-type': 'text/plain' }).end('no');
      const got = await postExpecting(routes[route]!);
      expect({ status: got.status, body: got.body }).toEqual({ status, body: 'no' });
      // The gateway is not stuck: the next request is served.
      answer = readThenAnswer;
      const next = await postExpecting(routes[route]!);
      expect(next.status).toBe(200);
    },
  );
});
