import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, createServer as createTcpServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { AppError } from '../../../src/envelope/errors.ts';
import {
  forward,
  relay,
  UpstreamSilent,
  UpstreamUnaskedInterim,
  type Outbound,
  type OutboundHandlers,
} from '../../../src/outbound/forward.ts';
import { createUpstream, type Upstream } from '../../../src/outbound/upstream.ts';
import { bareOutbound } from '../../helpers/bare-outbound.ts';
import { struckByHand } from '../../helpers/struck-timer.ts';
import { closeServers, listenLocally } from '../../helpers/local-server.ts';
const portOf = (server: Server) => (server.address() as AddressInfo).port;

/** Sends `GET /` on a socket of its own and resolves with every byte that came back. */
function rawGet(port: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('end', () => resolve(Buffer.concat(chunks)));
    socket.write('GET / HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n');
  });
}

/**
 * The undici exchange's own edge cases (outbound/forward.ts), beside what forward.test.ts holds
 * for every relay: no Keycloak, a local upstream whose every answer the test decides.
 */
describe('forward over undici: the exchange', () => {
  let answer: (req: IncomingMessage, res: ServerResponse) => void;
  const failures: Error[] = [];
  let upstreamServer: Server;
  let upstream: Upstream;
  const gateways: Server[] = [];

  /** A gateway forwarding every request to the upstream with `options` and `handlers`. */
  async function gateway(
    options: Partial<Outbound> = {},
    handlersFor: (res: ServerResponse) => Partial<OutboundHandlers> = () => ({}),
  ): Promise<number> {
    const server = createServer((req, res) => {
      try {
        forward(
          req,
          res,
          bareOutbound(upstream, { requestId: 'r-2', timeoutMs: 400, ...options }),
          {
            failed: (err) => {
              failures.push(err);
              return new AppError(
                err instanceof UpstreamSilent ? 'upstreamTimeout' : 'upstreamBadGateway',
              );
            },
            ...handlersFor(res),
          },
        );
      } catch (err) {
        failures.push(err as Error);
        res.writeHead(500).end('thrown');
      }
    });
    await listenLocally(server);
    gateways.push(server);
    return portOf(server);
  }

  beforeAll(async () => {
    upstreamServer = createServer((req, res) => answer(req, res));
    // One connection: a second request waits in the pool for it.
    upstream = createUpstream(await listenLocally(upstreamServer), { maxSockets: 1 });
  });
  afterAll(async () => {
    await closeServers(...gateways, upstreamServer);
  });
  beforeEach(() => {
    failures.length = 0;
  });

  it("relays the answer's header bytes as they came, without the hop-by-hop ones, with the request id", async () => {
    answer = (_req, res) => {
      res.setHeader('X-Name', 'caf\u00e9');
      res.setHeader('Keep-Alive', 'timeout=5');
      res.setHeader('X-Request-Id', 'upstream-own');
      res.end('ok');
    };
    const port = await gateway();
    const text = (await rawGet(port)).toString('latin1');
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    // Node writes the upstream's header as UTF-8: the client gets those very bytes.
    expect(text).toContain(`X-Name: ${Buffer.from('caf\u00e9', 'utf8').toString('latin1')}\r\n`);
    expect(text).not.toMatch(/keep-alive: timeout/i);
    expect(text).toMatch(/x-request-id: r-2\r\n/i);
    expect(text).not.toContain('upstream-own');
    expect(text.endsWith('ok')).toBe(true);
  });

  it("sends the upstream the client's trace context but not its baggage", async () => {
    let seen: IncomingMessage['headers'] | undefined;
    answer = (req, res) => {
      seen = req.headers;
      res.end();
    };
    const port = await gateway();
    const got = await fetch(`http://127.0.0.1:${port}/`, {
      headers: {
        traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
        baggage: 'tenant=other-org,user.id=admin',
      },
    });
    expect(got.status).toBe(200);
    expect(seen?.traceparent).toBe('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
    expect(seen?.baggage).toBeUndefined();
  });

  it('answers 504 to a request still waiting for a connection, as struck before connecting', async () => {
    // The upstream never answers: the first request holds the pool's one connection longer
    // than the second may wait.
    const held: ServerResponse[] = [];
    answer = (_req, res) => void held.push(res);
    // Two client addresses: the pool's one connection is each one's share.
    const patient = await gateway({ timeoutMs: 1500, client: '127.0.0.2' });
    const port = await gateway({ timeoutMs: 300, client: '127.0.0.3' });
    // The second once the first has reached the upstream (and is waiting there).
    const firstAnswer = fetch(`http://127.0.0.1:${patient}/`);
    await vi.waitFor(() => expect(held).toHaveLength(1));
    const [first, second] = await Promise.all([firstAnswer, fetch(`http://127.0.0.1:${port}/`)]);
    expect([first.status, second.status]).toEqual([504, 504]);
    expect(second.headers.get('x-request-id')).toBe('r-2');
    const silences = failures.filter((err) => err instanceof UpstreamSilent);
    expect(silences.map((err) => err.beforeConnect).sort()).toEqual([false, true]);
    for (const res of held) res.destroy();
  });

  it('holds the timer while a step works on the answer, and relays it whole after', async () => {
    const silence = struckByHand();
    let upstreamAnswer: ServerResponse | undefined;
    answer = (_req, res) => {
      upstreamAnswer = res;
      res.writeHead(200, { 'content-type': 'text/plain' }).write('the whole ');
    };
    let stepDone: (() => void) | undefined;
    const port = await gateway({ startTimer: silence.start }, (res) => ({
      answered: (_status, timer) => (taken) => {
        timer.hold();
        stepDone = () => {
          timer.restart();
          relay(taken, res);
        };
      },
    }));
    const got = fetch(`http://127.0.0.1:${port}/`);
    await vi.waitFor(() => expect(stepDone).toBeDefined());
    // The upstream's allowed silence runs out in the middle of its answer while the step holds
    // it: the gateway is the one busy, nothing is cut off.
    expect(silence.strike()).toBe(true);
    upstreamAnswer!.end('answer');
    stepDone!();
    const answered = await got;
    expect(answered.status).toBe(200);
    expect(await answered.text()).toBe('the whole answer');
    expect(failures).toEqual([]);
  });

  it('relays the final answer after informational ones (102 Processing, 103 Early Hints)', async () => {
    answer = (_req, res) => {
      res.writeProcessing();
      res.writeEarlyHints({ link: '</app.css>; rel=preload; as=style' }, () => {
        res.writeHead(201, { 'x-final': 'yes', 'content-length': '7' }).end('created');
      });
    };
    const relayed = await gateway();
    const text = (await rawGet(relayed)).toString('latin1');
    expect(text).toMatch(/^HTTP\/1\.1 201 /);
    // Neither interim head reaches the client, nor do the hints' headers join the final one.
    expect(text).not.toMatch(/^HTTP\/1\.1 10[23] /m);
    expect(text).not.toMatch(/^link:/im);
    expect(text).toMatch(/x-final: yes\r\n/i);
    expect(text).toMatch(/x-request-id: r-2\r\n/i);
    expect(text.endsWith('created')).toBe(true);
    // A step that takes the answer (the /auth proxy's) is handed the final one only.
    const statuses: number[] = [];
    const stepped = await gateway({}, (res) => ({
      answered: (status) => {
        statuses.push(status);
        return (taken) => relay(taken, res, 'r-2');
      },
    }));
    const got = await fetch(`http://127.0.0.1:${stepped}/`);
    expect(got.status).toBe(201);
    expect(await got.text()).toBe('created');
    expect(statuses).toEqual([201]);
    expect(failures).toEqual([]);
  });

  it("waits for a client still sending its body: the client's silence is no 504 of the upstream's", async () => {
    const silence = struckByHand();
    let arrived = false;
    answer = (req, res) => {
      arrived = true;
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => res.end(`got ${body}`));
    };
    const port = await gateway({ startTimer: silence.start });
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    const ended = new Promise((resolve) => socket.once('end', resolve));
    socket.write(
      'POST / HTTP/1.1\r\nHost: gw\r\nConnection: close\r\nContent-Length: 10\r\n\r\nabc',
    );
    // The upstream has every byte the client sent (undici writes the head with the first chunk);
    // the client owes the rest. The allowed silence runs out: it is the client's, whose own
    // bound is the server's request timeout (408), not the upstream's.
    await vi.waitFor(() => expect(arrived).toBe(true));
    expect(silence.strike()).toBe(true);
    socket.write('defghij');
    await ended;
    const text = Buffer.concat(chunks).toString('latin1');
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(text.endsWith('got abcdefghij')).toBe(true);
    expect(failures).toEqual([]);
  });

  it("cuts off an answer that trickles on past the answer's deadline, and closes the upstream's request", async () => {
    const deadline = struckByHand();
    let trickled: ServerResponse | undefined;
    const upstreamClosed = new Promise<void>((resolve) => {
      answer = (_req, res) => {
        trickled = res;
        res.once('close', () => resolve());
        // Each byte a sign of life: the silence timer never strikes.
        res.writeHead(200, { 'content-length': '1000' }).write('x');
      };
    });
    const port = await gateway({
      answerDeadlineMs: 60_000,
      startDeadline: deadline.start,
      timeoutMs: 5000,
    });
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.write('GET / HTTP/1.1\r\nHost: gw\r\n\r\n');
    await vi.waitFor(() => expect(Buffer.concat(chunks).toString('latin1')).toMatch(/\r\n\r\nx$/));
    trickled!.write('y');
    await vi.waitFor(() => expect(Buffer.concat(chunks).toString('latin1')).toMatch(/xy$/));
    // The answer's deadline strikes while it still trickles: the client's connection ends with
    // its answer short (its head is sent), and the upstream's request is closed.
    expect(deadline.strike()).toBe(true);
    await closed;
    await upstreamClosed;
    expect(Buffer.concat(chunks).toString('latin1')).toMatch(/^HTTP\/1\.1 200 [^]*xy$/);
    expect(trickled!.writableEnded).toBe(false);
  });

  it('answers 504 when the deadline strikes before the answer began', async () => {
    const deadline = struckByHand();
    const held: ServerResponse[] = [];
    answer = (_req, res) => {
      held.push(res);
      res.writeProcessing();
    };
    const port = await gateway({ answerDeadlineMs: 60_000, startDeadline: deadline.start });
    const got = fetch(`http://127.0.0.1:${port}/`);
    await vi.waitFor(() => expect(held).toHaveLength(1));
    expect(deadline.strike()).toBe(true);
    const answered = await got;
    expect(answered.status).toBe(504);
    expect(answered.headers.get('x-request-id')).toBe('r-2');
    expect(failures[0]).toBeInstanceOf(UpstreamSilent);
    for (const res of held) res.destroy();
  });

  it('throws what undici throws for a header it will not write, sending nothing', async () => {
    let arrived = 0;
    answer = (_req, res) => {
      arrived++;
      res.end();
    };
    const port = await gateway({ headers: ['x-bad', 'a\r\nx-injected: 1'] });
    const got = await fetch(`http://127.0.0.1:${port}/`);
    expect(got.status).toBe(500);
    expect(failures[0]).toMatchObject({ code: 'UND_ERR_INVALID_ARG' });
    expect(arrived).toBe(0);
  });

  it.each([
    ['100 Continue', 'HTTP/1.1 100 Continue\r\n\r\n'],
    [
      '101 Switching Protocols',
      'HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n',
    ],
  ])(
    "answers 502 to an upstream's unasked %s (undici refuses it), named for the log",
    async (status, interim) => {
      // A raw upstream: the interim answer to a request that asked for none, then the real one.
      const unasked = createTcpServer((socket) => {
        socket.on('error', () => {});
        socket.once('data', () => {
          socket.write(interim);
          socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
        });
      });
      const port = await gateway({
        upstream: createUpstream(await listenLocally(unasked), { maxSockets: 1 }),
      });
      try {
        const got = await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: 'form' });
        expect(got.status).toBe(502);
        expect(got.headers.get('x-request-id')).toBe('r-2');
        expect(failures).toHaveLength(1);
        expect(failures[0]).toBeInstanceOf(UpstreamUnaskedInterim);
        expect(failures[0]!.message).toContain(status);
      } finally {
        await new Promise((resolve) => unasked.close(resolve));
      }
    },
  );
});
