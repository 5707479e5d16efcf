import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { KEYCLOAK_NODE_POOL } from '../../../src/auth-proxy/auth-proxy.ts';
import { AppError } from '../../../src/envelope/errors.ts';
import { createKeycloakNodes, type KeycloakNodes } from '../../../src/keycloak/keycloak-nodes.ts';
import { forward, UpstreamSilent } from '../../../src/outbound/forward.ts';
import { createUpstream } from '../../../src/outbound/upstream.ts';
import { bareOutbound } from '../../helpers/bare-outbound.ts';
import { startAuthProxyGateway } from '../../helpers/auth-proxy-gateway.ts';
import { expectDocumentedFailure } from '../../helpers/documented-answer.ts';
import { requestFrom } from '../../helpers/from-address.ts';
import { closeServers, listenLocally } from '../../helpers/local-server.ts';

/** A POST from `localAddress` that announces 10 bytes of body and sends 3: a slow client. */
function slowPost(port: number, localAddress: string, path = '/') {
  const socket: Socket = connect({ port, host: '127.0.0.1', localAddress });
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.on('error', () => {});
  socket.write(`POST ${path} HTTP/1.1\r\nHost: gw\r\nContent-Length: 10\r\n\r\nabc`);
  return { socket, received: () => Buffer.concat(chunks).toString('latin1') };
}

/**
 * The upstream's pool is shared by every client: one client address (127.0.0.2) holding its
 * connections with slow bodies must not keep another (127.0.0.3) from being served.
 */
describe('forward: one client address cannot take the whole upstream pool', () => {
  const POOL = 16;
  /** Requests whose body is still coming, held at the upstream. */
  const held: IncomingMessage[] = [];
  let upstreamServer: Server;
  let gateway: Server;
  let port: number;

  beforeAll(async () => {
    upstreamServer = createServer((req, res: ServerResponse) => {
      if (req.method === 'POST') {
        held.push(req);
        req.resume();
        req.on('end', () => res.end('posted'));
        return;
      }
      res.end('served');
    });
    const upstream = createUpstream(await listenLocally(upstreamServer), { maxSockets: POOL });
    gateway = createServer((req, res) =>
      forward(
        req,
        res,
        bareOutbound(upstream, {
          client: req.socket.remoteAddress!,
          requestId: 'r-3',
          timeoutMs: 1000,
        }),
        {
          failed: (err) =>
            new AppError(err instanceof UpstreamSilent ? 'upstreamTimeout' : 'upstreamBadGateway'),
        },
      ),
    );
    await listenLocally(gateway);
    port = (gateway.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await closeServers(gateway, upstreamServer);
  });

  it('refuses a client over its share with 429, and serves another address meanwhile', async () => {
    const slow = Array.from({ length: POOL }, () => slowPost(port, '127.0.0.2'));
    const refused = () => slow.filter((c) => c.received().startsWith('HTTP/1.1 429 '));
    // Each slow request is either held at the upstream or refused by the gateway.
    await vi.waitFor(() => expect(held.length + refused().length).toBe(POOL), { timeout: 5000 });
    expect(held.length).toBeLessThan(POOL);
    const refusal = refused()[0]!.received();
    expect(refusal).toMatch(/\r\nretry-after: 1\r\n/i);
    expect(refusal).toMatch(/\r\nx-request-id: r-3\r\n/i);
    expect(refusal).toContain('"result":"429-00002"');

    // Another client is served while 127.0.0.2's bodies still trickle.
    const other = await requestFrom('127.0.0.3', `http://127.0.0.1:${port}/`);
    expect(other.status).toBe(200);
    expect(other.text).toBe('served');

    // The slow ones finish: their places are given back, and 127.0.0.2 is served again.
    for (const client of slow) client.socket.write('defghij');
    await vi.waitFor(() =>
      expect(slow.filter((c) => c.received().endsWith('posted'))).toHaveLength(held.length),
    );
    const again = await requestFrom('127.0.0.2', `http://127.0.0.1:${port}/`);
    expect(again.status).toBe(200);
    for (const client of slow) client.socket.destroy();
  });

  it('gives the places back when the slow clients leave', async () => {
    held.length = 0;
    const slow = Array.from({ length: POOL }, () => slowPost(port, '127.0.0.4'));
    const refused = () => slow.filter((c) => c.received().startsWith('HTTP/1.1 429 '));
    await vi.waitFor(() => expect(held.length + refused().length).toBe(POOL));
    expect(refused().length).toBeGreaterThan(0);
    for (const client of slow) client.socket.destroy();
    await vi.waitFor(async () =>
      expect((await requestFrom('127.0.0.4', `http://127.0.0.1:${port}/`)).status).toBe(200),
    );
  });

  it('serves a burst of one address beyond its share while the pool has room', async () => {
    held.length = 0;
    // Half the pool, four times an address's share (an eighth): a fleet's jobs starting together.
    const burst = Array.from({ length: POOL / 2 }, () => slowPost(port, '127.0.0.5'));
    await vi.waitFor(() => expect(held).toHaveLength(POOL / 2));
    for (const client of burst) client.socket.write('defghij');
    await vi.waitFor(() =>
      expect(burst.filter((c) => c.received().endsWith('posted'))).toHaveLength(POOL / 2),
    );
    expect(burst.filter((c) => c.received().startsWith('HTTP/1.1 429 '))).toHaveLength(0);
    for (const client of burst) client.socket.destroy();
  });
});

/**
 * The same share of a Keycloak node's pool on `/auth`, whose clients (the token endpoint's, the
 * admin API's) read Keycloak's errors: the refusal is in OAuth's shape, as the API description
 * documents it for the token endpoint.
 */
describe('/auth: one client address over its share of a Keycloak node', () => {
  const TOKEN = '/auth/realms/acme/protocol/openid-connect/token';
  const held: IncomingMessage[] = [];
  let keycloak: Server;
  let gateway: Server;
  let nodes: KeycloakNodes;
  let port: number;

  beforeAll(async () => {
    keycloak = createServer((req, res: ServerResponse) => {
      held.push(req);
      req.resume();
      req.on('end', () => res.end('{}'));
    });
    nodes = createKeycloakNodes({
      urls: [`${await listenLocally(keycloak)}/auth`],
      timeoutMs: 1000,
    });
    ({ server: gateway } = await startAuthProxyGateway([], {
      nodes,
      publicUrl: 'http://gateway.test',
      timeoutMs: 1000,
      answerDeadlineMs: 300_000,
    }));
    port = (gateway.address() as AddressInfo).port;
  });
  afterAll(async () => {
    nodes.close();
    await closeServers(gateway, keycloak);
  });

  it("refuses in OAuth's shape with Retry-After, as the token endpoint documents", async () => {
    const slow = Array.from({ length: KEYCLOAK_NODE_POOL }, () =>
      slowPost(port, '127.0.0.6', TOKEN),
    );
    const refused = () => slow.filter((c) => c.received().startsWith('HTTP/1.1 429 '));
    await vi.waitFor(() => expect(held.length + refused().length).toBe(KEYCLOAK_NODE_POOL), {
      timeout: 10_000,
    });
    expect(refused().length).toBeGreaterThan(0);
    const refusal = refused()[0]!.received();
    const head = refusal.slice(0, refusal.indexOf('\r\n\r\n'));
    expect(head).toMatch(/\r\nretry-after: 1(\r\n|$)/i);
    expect(head).toMatch(/\r\ncontent-type: application\/json/i);
    expect(head).toMatch(/\r\ncache-control: no-store(\r\n|$)/i);
    const body: unknown = JSON.parse(/\{.*\}/s.exec(refusal)![0]);
    expect(body).toEqual({
      error: 'temporarily_unavailable',
      error_description: 'Too many requests from your address at once; retry later.',
    });
    expectDocumentedFailure('issueToken', {
      status: 429,
      body,
      headers: new Headers({ 'retry-after': '1' }),
    });
    for (const client of slow) client.socket.destroy();
  });
});
