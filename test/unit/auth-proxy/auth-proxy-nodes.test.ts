import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardFormBody } from '../../../src/auth-proxy/form-body-guard.ts';
import { createKeycloakNodes, type KeycloakNodes } from '../../../src/keycloak/keycloak-nodes.ts';
import { startAuthProxyGateway } from '../../helpers/auth-proxy-gateway.ts';
import { closeServers, listenLocally, refusingBaseUrl } from '../../helpers/local-server.ts';

/** A fake Keycloak node: answers with its name and the form it got, or cuts the connection. */
interface FakeNode {
  url: string;
  requests: number;
  cut: boolean;
  close(): Promise<void>;
}

async function startFakeNode(name: string): Promise<FakeNode> {
  const server = createServer((req, res) => {
    node.requests++;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (node.cut) {
        res.socket?.destroy();
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({ node: name, path: req.url, form: Buffer.concat(chunks).toString() }),
      );
    });
  });
  const url = `${await listenLocally(server)}/auth`;
  const node: FakeNode = {
    url,
    requests: 0,
    cut: false,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  return node;
}

const refusingUrl = async () => `${await refusingBaseUrl()}/auth`;

/** The /auth proxy in front of several nodes, each request through a gateway of its own. */
describe('/auth proxy: several nodes', () => {
  let a: FakeNode;
  let b: FakeNode;
  let refusing: string;
  const opened: { server: Server; nodes: KeycloakNodes }[] = [];

  beforeAll(async () => {
    a = await startFakeNode('a');
    b = await startFakeNode('b');
    refusing = await refusingUrl();
  });
  afterAll(async () => {
    for (const { server, nodes } of opened) {
      nodes.close();
      await closeServers(server);
    }
    await a.close();
    await b.close();
  });

  /** What the proxy counted, as `upstream cause`. */
  const counted: string[] = [];

  async function gateway(urls: string[]) {
    const nodes = createKeycloakNodes({ urls, timeoutMs: 1000 });
    counted.length = 0;
    const { server, base } = await startAuthProxyGateway(guardFormBody(), {
      nodes,
      publicUrl: 'http://gateway.test',
      timeoutMs: 1000,
      answerDeadlineMs: 300_000,
      metrics: { proxyFailure: (upstream, cause) => counted.push(`${upstream} ${cause}`) },
    });
    opened.push({ server, nodes });
    const post = async (form: string) => {
      const res = await fetch(`${base}/auth/realms/acme/protocol/openid-connect/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: form,
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const get = async () => {
      const res = await fetch(`${base}/auth/realms/acme`);
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    return { nodes, post, get };
  }

  it('sends requests round robin over the nodes', async () => {
    const { get } = await gateway([a.url, b.url]);
    const names = [];
    for (let i = 0; i < 4; i++) names.push((await get()).body.node);
    expect(names).toEqual(['a', 'b', 'a', 'b']);
  });

  it('sends a refused grant to the next node with its form, and takes the node out', async () => {
    const { nodes, post } = await gateway([refusing, a.url]);
    const answer = await post('grant_type=password&username=u&password=p');
    expect(answer).toEqual({
      status: 200,
      body: {
        node: 'a',
        path: '/auth/realms/acme/protocol/openid-connect/token',
        form: 'grant_type=password&username=u&password=p',
      },
    });
    expect(nodes.all.map((node) => node.state)).toEqual(['down', 'up']);
    // The attempt sent elsewhere failed all the same.
    expect(counted).toEqual(['keycloak refused']);
  });

  it('answers 503 in the envelope, not a second node, once the request reached a node', async () => {
    a.cut = true;
    try {
      const { nodes, post } = await gateway([a.url, b.url]);
      const before = b.requests;
      const answer = await post('grant_type=password&username=u&password=p');
      expect(answer).toMatchObject({ status: 503, body: { result: '503-11001', data: null } });
      expect(b.requests).toBe(before);
      expect(counted).toEqual(['keycloak reset']);
      expect(nodes.all.map((node) => node.state)).toEqual(['down', 'up']);
    } finally {
      a.cut = false;
    }
  });

  it('with every node refusing, answers 503 after trying', async () => {
    const { post } = await gateway([refusing, await refusingUrl()]);
    const answer = await post('grant_type=password');
    expect(answer).toMatchObject({ status: 503, body: { result: '503-11001' } });
  });

  it.each([
    ['100 Continue', 'HTTP/1.1 100 Continue\r\n\r\n'],
    [
      '101 Switching Protocols',
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n',
    ],
  ])(
    "answers 502 in the envelope to a node's unasked %s, and keeps the node in",
    async (_status, interim) => {
      // A node that answers with an interim answer nobody asked for, then the real answer.
      const unasked = createTcpServer((socket) => {
        socket.on('error', () => {});
        socket.once('data', () => {
          socket.write(interim);
          socket.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n');
          socket.write('content-length: 2\r\n\r\n{}');
        });
      });
      const url = `${await listenLocally(unasked)}/auth`;
      try {
        const { nodes, post } = await gateway([url, b.url]);
        const before = b.requests;
        const answer = await post('grant_type=password&username=u&password=p');
        expect(answer).toMatchObject({ status: 502, body: { result: '502-11001', data: null } });
        expect(b.requests).toBe(before);
        expect(nodes.all.map((node) => node.state)).toEqual(['up', 'up']);
      } finally {
        await new Promise((resolve) => unasked.close(resolve));
      }
    },
  );
});
