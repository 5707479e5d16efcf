import { createServer, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { Dispatcher } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { AppError } from '../../../src/envelope/errors.ts';
import { forward, UpstreamSilent } from '../../../src/outbound/forward.ts';
import { createUpstream, type Upstream } from '../../../src/outbound/upstream.ts';
import { bareOutbound } from '../../helpers/bare-outbound.ts';
import { closeServers, listenLocally } from '../../helpers/local-server.ts';
import { struckByHand } from '../../helpers/struck-timer.ts';

/**
 * The upstream's pool, its every exchange's controller kept: whether undici reads on from the
 * upstream for the gateway (`paused`) is the relay's back-pressure, seen without waiting.
 */
function watchedPool(upstream: Upstream) {
  const controllers: Dispatcher.DispatchController[] = [];
  const dispatcher = {
    dispatch: (options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) =>
      upstream.dispatcher.dispatch(
        options,
        new Proxy(handler, {
          get(target, name) {
            const value = Reflect.get(target, name) as unknown;
            if (name === 'onRequestStart' && typeof value === 'function') {
              return (controller: Dispatcher.DispatchController, context: unknown) => {
                controllers.push(controller);
                return value.call(target, controller, context) as unknown;
              };
            }
            return typeof value === 'function' ? (value.bind(target) as unknown) : value;
          },
        }),
      ),
  } as Dispatcher;
  const watched: Upstream = {
    host: upstream.host,
    basePath: upstream.basePath,
    dispatcher,
    admit: (client) => upstream.admit(client),
    release: (client) => upstream.release(client),
    request: (...args) => upstream.request(...args),
  };
  return { upstream: watched, controllers };
}
const portOf = (server: Server) => (server.address() as AddressInfo).port;

/** A raw client: sends `GET /` and keeps whatever comes back, reading only when told. */
function rawClient(port: number) {
  const socket: Socket = connect(port, '127.0.0.1');
  let received = 0;
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('data', (chunk: Buffer) => (received += chunk.length));
  socket.on('error', () => {});
  socket.write('GET / HTTP/1.1\r\nHost: gw\r\n\r\n');
  return { socket, closed, received: () => received };
}

/** The upstream's side of one request, as the test drives it. */
interface Served {
  res: ServerResponse;
  /** Resolves when the gateway's connection to the upstream closes (or the answer ends). */
  closed: Promise<void>;
}

describe('forward: what the relay keeps for every proxy', () => {
  const served: Served[] = [];
  const failures: Error[] = [];
  /** The answer's deadline, struck by the test. */
  const deadline = struckByHand();
  let controllers: Dispatcher.DispatchController[];
  let upstreamServer: Server;
  let gateway: Server;
  let port: number;
  /** The upstream's side of the request the test just sent. */
  const nextServed = () =>
    vi.waitFor(
      () => {
        if (served.length === 0) throw new Error('not arrived yet');
        return served[0]!;
      },
      { timeout: 5000 },
    );

  beforeAll(async () => {
    upstreamServer = createServer((req, res) => {
      // The answer closes before its end only when the connection does.
      const closed = new Promise<void>((resolve) => res.once('close', () => resolve()));
      req.resume();
      served.push({ res, closed });
    });
    const pool = watchedPool(
      createUpstream(await listenLocally(upstreamServer), { maxSockets: 8 }),
    );
    const upstream = pool.upstream;
    controllers = pool.controllers;
    gateway = createServer((req, res) =>
      forward(
        req,
        res,
        bareOutbound(upstream, {
          requestId: 'r-1',
          timeoutMs: 1500,
          answerDeadlineMs: 60_000,
          startDeadline: deadline.start,
        }),
        {
          failed: (err) => {
            failures.push(err);
            return new AppError(
              err instanceof UpstreamSilent ? 'upstreamTimeout' : 'upstreamBadGateway',
            );
          },
        },
      ),
    );
    await listenLocally(gateway);
    port = portOf(gateway);
  });
  afterAll(async () => {
    await closeServers(gateway, upstreamServer);
  });
  beforeEach(() => {
    served.length = 0;
    failures.length = 0;
  });

  it('holds the upstream while the client reads nothing, and gives it all once it reads', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'a');
    const total = 64 * 1024 * 1024;
    const client = rawClient(port);
    client.socket.pause();
    const { res } = await nextServed();
    res.writeHead(200, { 'content-length': String(total) });
    let written = 0;
    const write = () => {
      while (written < total) {
        written += chunk.length;
        if (!res.write(chunk)) {
          res.once('drain', write);
          return;
        }
      }
      res.end();
    };
    write();
    // Nothing read: the relay pauses the upstream once the client's connection is full, and
    // the upstream waits with most of its answer unwritten (a relay without back-pressure
    // would read on, holding the whole answer, and never pause).
    const exchange = await vi.waitFor(
      () => {
        const last = controllers.at(-1);
        if (!last?.paused || !res.writableNeedDrain) throw new Error('the upstream still flows');
        return last;
      },
      { timeout: 4000 },
    );
    expect(written).toBeLessThan(total / 2);
    expect(exchange.paused).toBe(true);
    client.socket.resume();
    await vi.waitFor(() => expect(client.received()).toBeGreaterThan(total), { timeout: 20_000 });
    expect(written).toBe(total);
    expect(exchange.paused).toBe(false);
    client.socket.destroy();
  });

  it('closes its request to the upstream when a client reading nothing is still owed the answer at its deadline', async () => {
    const client = rawClient(port);
    client.socket.pause();
    const { res, closed } = await nextServed();
    const chunk = Buffer.alloc(64 * 1024, 'a');
    res.writeHead(200, { 'content-length': String(64 * 1024 * 1024) });
    const write = () => {
      while (res.write(chunk));
      if (!res.destroyed) res.once('drain', write);
    };
    write();
    // The relay waits for the client: the upstream is paused, its connection held.
    await vi.waitFor(
      () => {
        if (!controllers.at(-1)?.paused || !res.writableNeedDrain) throw new Error('flowing');
      },
      { timeout: 4000 },
    );
    // The client reads nothing until the answer's deadline: the upstream's request is closed
    // (its connection back), and so is the client's.
    expect(deadline.strike()).toBe(true);
    await closed;
    expect(res.writableEnded).toBe(false);
    // Reading on, the client finds its connection ended with the answer short.
    client.socket.resume();
    await client.closed;
    expect(client.received()).toBeLessThan(64 * 1024 * 1024);
    expect(failures).toEqual([]);
  });

  it('closes its request to the upstream when the client leaves mid-answer', async () => {
    const client = rawClient(port);
    const { res, closed } = await nextServed();
    res.writeHead(200, { 'content-length': '1000' });
    res.write('x'.repeat(10));
    await vi.waitFor(() => expect(client.received()).toBeGreaterThan(0));
    client.socket.destroy();
    await closed;
    // Closed for the client's leaving, not cut off by the upstream's silence (1.5 s), which
    // would be a failure (UpstreamSilent).
    expect(res.writableEnded).toBe(false);
    expect(failures).toEqual([]);
  });

  it("ends the client's connection when the upstream goes away mid-answer", async () => {
    const client = rawClient(port);
    const { res } = await nextServed();
    res.writeHead(200, { 'content-length': '1000' });
    res.write('x'.repeat(10));
    await vi.waitFor(() => expect(client.received()).toBeGreaterThan(0));
    res.socket!.destroy();
    await client.closed;
    expect(client.received()).toBeLessThan(1000);
  });

  it('answers 504 when the upstream stays silent, with the request id', async () => {
    const answer = await fetch(`http://127.0.0.1:${port}/`);
    expect(answer.status).toBe(504);
    expect(answer.headers.get('x-request-id')).toBe('r-1');
    expect(failures[0]).toBeInstanceOf(UpstreamSilent);
  });
});
