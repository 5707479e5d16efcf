import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import {
  createServer as createTcpServer,
  type AddressInfo,
  type Server as TcpServer,
} from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../../src/envelope/errors.ts';
import { createMetrics, type Metrics } from '../../../src/metrics/metrics.ts';
import { forward, type Outbound } from '../../../src/outbound/forward.ts';
import { type ProxyFailureCause } from '../../../src/outbound/proxy-failures.ts';
import { createUpstream } from '../../../src/outbound/upstream.ts';
import { buildInfo } from '../../../src/release/build-info.ts';
import { bareOutbound } from '../../helpers/bare-outbound.ts';
import { struckByHand } from '../../helpers/struck-timer.ts';
import { closeServers, listenLocally, refusingBaseUrl } from '../../helpers/local-server.ts';

/** The series of `realmgate_proxy_failures_total` that counted, as `upstream cause value`. */
async function countedFailures(metrics: Metrics): Promise<string[]> {
  const families = await metrics.registry!.getMetricsAsJSON();
  const family = families.find((f) => f.name === 'realmgate_proxy_failures_total')!;
  return family.values
    .filter((sample) => sample.value > 0)
    .map((sample) => `${sample.labels.upstream} ${sample.labels.cause} ${sample.value}`);
}

/**
 * `realmgate_proxy_failures_total`: each way a proxied request fails is counted once under its
 * cause, read from the one table of causes (outbound/proxy-failures.ts), against a local
 * upstream that fails as the test decides.
 */
describe('proxy failures, by cause', () => {
  let answer: (req: IncomingMessage, res: ServerResponse) => void;
  let upstreamServer: Server;
  let upstreamUrl: string;
  let resetting: TcpServer;
  const gateways: Server[] = [];

  /** Sends one request through `forward` to `url`; resolves with the client's status and the causes told. */
  async function through(
    url: string,
    options: Partial<Outbound> & { maxSockets?: number; placeHeld?: boolean } = {},
  ): Promise<{ status: number | 'cut'; causes: ProxyFailureCause[]; metrics: Metrics }> {
    const metrics = createMetrics({ readiness: {}, build: buildInfo() });
    const causes: ProxyFailureCause[] = [];
    const upstream = createUpstream(url, { maxSockets: options.maxSockets ?? 8 });
    // The pool's one place already held by the same address.
    if (options.placeHeld === true) upstream.admit(options.client!);
    const server = createServer((req, res) => {
      forward(
        req,
        res,
        bareOutbound(upstream, {
          requestId: 'r-1',
          timeoutMs: 5000,
          countFailure: (cause) => {
            causes.push(cause);
            metrics.proxyFailure('automation', cause);
          },
          ...options,
        }),
        { failed: (err) => new AppError('upstreamBadGateway', { cause: err }) },
      );
    });
    gateways.push(server);
    const base = await listenLocally(server);
    const status = await fetch(base)
      .then(async (res) => {
        await res.arrayBuffer();
        return res.status;
      })
      .catch(() => 'cut' as const);
    return { status, causes, metrics };
  }

  beforeAll(async () => {
    upstreamServer = createServer((req, res) => answer(req, res));
    upstreamUrl = await listenLocally(upstreamServer);
    // Reads the request, then resets the connection.
    resetting = createTcpServer((socket) => {
      socket.on('error', () => {});
      socket.once('data', () => socket.resetAndDestroy());
    });
    await listenLocally(resetting);
  });
  afterAll(async () => {
    await closeServers(...gateways, upstreamServer);
    await new Promise((resolve) => resetting.close(resolve));
  });

  it('counts nothing for an answer relayed whole', async () => {
    answer = (_req, res) => res.end('ok');
    const got = await through(upstreamUrl);
    expect(got).toMatchObject({ status: 200, causes: [] });
    expect(await countedFailures(got.metrics)).toEqual([]);
  });

  it('refused: the connection refused', async () => {
    const got = await through(await refusingBaseUrl());
    expect(got).toMatchObject({ status: 502, causes: ['refused'] });
    expect(await countedFailures(got.metrics)).toEqual(['automation refused 1']);
  });

  it('unreachable: a name that does not resolve', async () => {
    // RFC 6761: `.invalid` never resolves.
    const got = await through('http://automation.invalid:8080');
    expect(got).toMatchObject({ status: 502, causes: ['unreachable'] });
  });

  it('reset: the connection reset before the answer', async () => {
    const got = await through(`http://127.0.0.1:${(resetting.address() as AddressInfo).port}`);
    expect(got).toMatchObject({ status: 502, causes: ['reset'] });
  });

  it("reset: the connection closed mid-answer (the client's cut too)", async () => {
    answer = (_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('part', () => res.socket?.destroy());
    };
    const got = await through(upstreamUrl);
    expect(got).toMatchObject({ status: 'cut', causes: ['reset'] });
  });

  it('timeout: the upstream silent', async () => {
    const silence = struckByHand();
    let arrived: () => void;
    const reached = new Promise<void>((resolve) => (arrived = resolve));
    answer = () => arrived();
    const got = through(upstreamUrl, { startTimer: silence.start });
    await reached;
    expect(silence.strike()).toBe(true);
    expect(await got).toMatchObject({ status: 502, causes: ['timeout'] });
  });

  it("deadline: the answer still to come at the answer's deadline", async () => {
    const deadline = struckByHand();
    // The deadline starts with an informational head; the final one never comes.
    let started: () => void;
    const lasting = new Promise<void>((resolve) => (started = resolve));
    answer = (_req, res) => res.writeEarlyHints({ link: '</a.css>; rel=preload' });
    const got = through(upstreamUrl, {
      answerDeadlineMs: 1000,
      startDeadline: (ms, strike) => {
        started();
        return deadline.start(ms, strike);
      },
    });
    await lasting;
    expect(deadline.strike()).toBe(true);
    expect(await got).toMatchObject({ status: 502, causes: ['deadline'] });
  });

  it('unasked_interim: an unasked 100 Continue', async () => {
    answer = (_req, res) => {
      res.writeContinue();
      res.end('ok');
    };
    const got = await through(upstreamUrl);
    expect(got).toMatchObject({ status: 502, causes: ['unasked_interim'] });
  });

  it('bad_answer: what is not HTTP', async () => {
    const garbling = createTcpServer((socket) => {
      socket.on('error', () => {});
      socket.once('data', () => socket.end('SMTP ready\r\n\r\n'));
    });
    const url = await listenLocally(garbling);
    try {
      const got = await through(url);
      expect(got).toMatchObject({ status: 502, causes: ['bad_answer'] });
    } finally {
      await new Promise((resolve) => garbling.close(resolve));
    }
  });

  it('over_share: refused with 429 before anything is sent', async () => {
    let reached = 0;
    answer = (_req, res) => res.end(String(++reached));
    const got = await through(upstreamUrl, {
      maxSockets: 1,
      client: '127.0.0.9',
      placeHeld: true,
    });
    expect(got).toMatchObject({ status: 429, causes: ['over_share'] });
    expect(reached).toBe(0);
    expect(await countedFailures(got.metrics)).toEqual(['automation over_share 1']);
  });
});
