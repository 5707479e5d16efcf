import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createKeycloakCalls,
  type KeycloakCallKind,
  type KeycloakCallOutcome,
} from '../../../src/keycloak/keycloak-calls.ts';
import { listenLocally, refusingBaseUrl } from '../../helpers/local-server.ts';

/** A fake Keycloak node on a local socket: counts requests, and answers as told. */
interface FakeNode {
  url: string;
  requests: number;
  /** Answers a request; `head` is its first bytes (its request line first). */
  behave: (socket: Socket, head: string) => void;
  close(): Promise<void>;
}

const ok = (body: string) => (socket: Socket) =>
  socket.end(
    `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );

async function startFakeNode(): Promise<FakeNode> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.once('data', (chunk: Buffer) => {
      node.requests++;
      node.behave(socket, chunk.toString('latin1'));
    });
  });
  const url = `${await listenLocally(server)}/auth`;
  const node: FakeNode = {
    url,
    requests: 0,
    behave: ok('{}'),
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return node;
}

/** A URL on which nothing listens: connections are refused. */
const refusingUrl = async () => `${await refusingBaseUrl()}/auth`;

const FORM = 'grant_type=password&username=a&password=b';
const readJson = (status: number, body: string): unknown => ({
  status,
  body: JSON.parse(body) as unknown,
});

/**
 * Several nodes behind the client layer: which calls go to another node after which failure,
 * and what the client and the observer see.
 */
describe('Keycloak client layer: several nodes', () => {
  let healthy: FakeNode;
  let other: FakeNode;
  let refusing: string;

  beforeAll(async () => {
    healthy = await startFakeNode();
    other = await startFakeNode();
    refusing = await refusingUrl();
  });
  afterAll(async () => {
    await healthy.close();
    await other.close();
  });

  function layer(urls: string[], timeoutMs = 300, grantTimeoutMs?: number) {
    const seen: [KeycloakCallKind, KeycloakCallOutcome][] = [];
    const calls = createKeycloakCalls({
      keycloakUrl: urls,
      timeoutMs,
      grantTimeoutMs,
      observer: { onCall: (kind, outcome) => seen.push([kind, outcome]) },
    });
    const call = (kind: KeycloakCallKind, form?: string) =>
      calls.exchange(kind, '/realms/acme/x', form, readJson).then(
        (value) => ({ value, error: undefined }),
        (error: unknown) => ({ value: undefined, error: error as { status: number } }),
      );
    return { calls, seen, call };
  }

  it('spreads calls round robin over the nodes', async () => {
    healthy.behave = ok('{"n":0}');
    other.behave = ok('{"n":1}');
    const { calls, call } = layer([healthy.url, other.url]);
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push((await call('jwks')).value);
    expect(answers).toEqual([0, 1, 0, 1].map((n) => ({ status: 200, body: { n } })));
    calls.nodes.close();
  });

  it('sends every kind of call to another node when the connection was refused, and takes the node out', async () => {
    healthy.behave = ok('{"n":0}');
    for (const kind of ['grant', 'introspection', 'jwks'] as const) {
      const { calls, seen, call } = layer([refusing, healthy.url]);
      const { value } = await call(kind, kind === 'jwks' ? undefined : FORM);
      expect(value).toEqual({ status: 200, body: { n: 0 } });
      // One call, one outcome: the retry is part of it.
      expect(seen).toEqual([[kind, 'ok']]);
      expect(calls.nodes.all.map((node) => node.state)).toEqual(['down', 'up']);
      // The node that is down gets no more calls.
      expect((await call(kind, kind === 'jwks' ? undefined : FORM)).value).toBeDefined();
      calls.nodes.close();
    }
  });

  it('tries introspection and key sets on another node after a timeout, never a grant', async () => {
    healthy.behave = () => undefined;
    other.behave = ok('{"n":1}');
    for (const kind of ['introspection', 'jwks'] as const) {
      const { calls, seen, call } = layer([healthy.url, other.url]);
      const { value } = await call(kind, kind === 'jwks' ? undefined : FORM);
      expect(value).toEqual({ status: 200, body: { n: 1 } });
      expect(seen).toEqual([[kind, 'ok']]);
      calls.nodes.close();
    }
    const { calls, seen, call } = layer([healthy.url, other.url]);
    const before = other.requests;
    const { error } = await call('grant', FORM);
    expect(error).toMatchObject({ status: 504, result: '504-11001' });
    expect(seen).toEqual([['grant', 'timeout']]);
    expect(other.requests).toBe(before);
    // Taken out all the same once its probe does not answer either: the next grant goes to the
    // other node.
    await expect.poll(() => calls.nodes.all.map((node) => node.state)).toEqual(['down', 'up']);
    expect((await call('grant', FORM)).value).toEqual({ status: 200, body: { n: 1 } });
    calls.nodes.close();
  });

  it("a grant waits past the calls' timeout while its node answers its probe: busy, not down", async () => {
    // Grants answered after 3 s, the calls' timeout 1.5 s, a grant's 20 s; probes at once. The
    // probe's bound (the calls' timeout) is seconds: a loaded machine may take a while to let
    // even this process's own server answer, and the node would be down for it.
    healthy.behave = (socket, head) => {
      if (head.startsWith('GET')) ok('{}')(socket);
      else setTimeout(() => ok('{"n":0}')(socket), 3000);
    };
    other.behave = ok('{"n":1}');
    const { calls, seen, call } = layer([healthy.url, other.url], 1500, 20_000);
    const probesBefore = healthy.requests;
    expect((await call('grant', FORM)).value).toEqual({ status: 200, body: { n: 0 } });
    expect(seen).toEqual([['grant', 'ok']]);
    // Probed once (the grant and the probe: two requests), and still up.
    expect(healthy.requests - probesBefore).toBe(2);
    expect(calls.nodes.all.map((node) => node.state)).toEqual(['up', 'up']);
    calls.nodes.close();
  }, 30_000);

  it('a grant on a node that does not answer its probe either is cut off then, not at its own bound', async () => {
    healthy.behave = () => undefined;
    const { calls, seen, call } = layer([healthy.url, other.url], 200, 60_000);
    const { error } = await call('grant', FORM);
    expect(error).toMatchObject({ status: 504, result: '504-11001' });
    expect(seen).toEqual([['grant', 'timeout']]);
    expect(calls.nodes.all[0]!.state).toBe('down');
    calls.nodes.close();
  });

  it('never sends a grant elsewhere once the connection was made, even if it was then cut', async () => {
    healthy.behave = (socket) => socket.destroy();
    other.behave = ok('{"n":1}');
    const { calls, call } = layer([healthy.url, other.url]);
    const before = other.requests;
    expect((await call('grant', FORM)).error).toMatchObject({ status: 503 });
    expect(other.requests).toBe(before);
    calls.nodes.close();
  });

  // Counted, not timed: one request reached each node, so one retry and no more.
  it(
    'tries once only: two nodes failing answer with the second failure',
    { timeout: 20_000 },
    async () => {
      // The introspections each node got (its probes, GET, are not counted).
      const posted = [0, 0];
      healthy.behave = (_socket, head) => void (head.startsWith('POST') && posted[0]!++);
      other.behave = (_socket, head) => void (head.startsWith('POST') && posted[1]!++);
      const { calls, seen, call } = layer([healthy.url, other.url], 200);
      expect((await call('introspection', FORM)).error).toMatchObject({ status: 504 });
      expect(seen).toEqual([['introspection', 'timeout']]);
      // Each node's probe does not answer either.
      await expect.poll(() => calls.nodes.all.map((node) => node.state)).toEqual(['down', 'down']);
      // A node counts a request when its bytes are read, which a loaded machine may put off until
      // after the client's timeout: wait for that event rather than read the count at once.
      await expect
        .poll(() => posted, {
          timeout: 10_000,
        })
        .toEqual([1, 1]);
      calls.nodes.close();
    },
  );

  it('does not take a node out, nor retry, for an answer it cannot use', async () => {
    healthy.behave = ok('not json');
    other.behave = ok('{"n":1}');
    const { calls, call } = layer([healthy.url, other.url]);
    const before = other.requests;
    const { error } = await call('jwks');
    expect(error).toMatchObject({ status: 502 });
    expect(other.requests).toBe(before);
    expect(calls.nodes.all.map((node) => node.state)).toEqual(['up', 'up']);
    calls.nodes.close();
  });

  it('runs admin requests on the node it picks, and on another one if that cannot connect', async () => {
    const { calls, seen } = layer([refusing, healthy.url]);
    const tried: string[] = [];
    const refused = Object.assign(new TypeError('fetch failed'), {
      cause: Object.assign(new Error('connect'), { code: 'ECONNREFUSED' }),
    });
    const value = await calls.admin((nodeUrl) => {
      tried.push(nodeUrl);
      return nodeUrl === refusing ? Promise.reject(refused) : Promise.resolve({ id: 'x' });
    });
    expect(value).toEqual({ id: 'x' });
    expect(tried).toEqual([refusing, healthy.url]);
    expect(seen).toEqual([['admin', 'ok']]);
    calls.nodes.close();
  });

  it('retries an admin read after a timeout, never a write', async () => {
    const timedOut = new DOMException('The operation timed out.', 'TimeoutError');
    for (const read of [true, false]) {
      const { calls } = layer([healthy.url, other.url]);
      const tried: string[] = [];
      const outcome = await calls
        .admin((nodeUrl) => {
          tried.push(nodeUrl);
          return tried.length === 1 ? Promise.reject(timedOut) : Promise.resolve([]);
        }, read)
        .then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        );
      if (read) {
        expect(outcome).toEqual({ value: [] });
        expect(tried).toEqual([healthy.url, other.url]);
      } else {
        expect(outcome).toMatchObject({ error: { status: 504 } });
        expect(tried).toEqual([healthy.url]);
      }
      calls.nodes.close();
    }
  });

  it('with one node, fails without a second attempt', async () => {
    const { calls, seen, call } = layer([refusing]);
    expect((await call('jwks')).error).toMatchObject({ status: 503, result: '503-11001' });
    expect(seen).toEqual([['jwks', 'unreachable']]);
    calls.nodes.close();
  });
});
