import { Agent, createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import { Pool, type Dispatcher } from 'undici';
import { readyUntilParentExits } from './processes.ts';

/**
 * A helper server on `BENCH_PORT`: without `BENCH_UPSTREAM`, the trivial upstream (156 bytes of
 * JSON); with it, the **limit**, a minimal `node:http` proxy to it, or with
 * `BENCH_CLIENT=undici` the **undici limit** (README.md says what each stands for).
 */
const body = Buffer.from(
  '{"data":[{"parameter":{"operation_id":"op-1","operation_name":"bench"},"file":{}}],' +
    '"message":"SUCCESS","result":"000-00000","ts":"2025-01-01T00:00:00.000Z"}',
);
const upstream = process.env.BENCH_UPSTREAM ? new URL(process.env.BENCH_UPSTREAM) : undefined;
const agent = new Agent({ keepAlive: true, maxSockets: 1024 });
const pool =
  upstream && process.env.BENCH_CLIENT === 'undici'
    ? new Pool(upstream.origin, { connections: 1024 })
    : undefined;

const server = createServer((req, res) => {
  if (!upstream) {
    req.resume().on('end', () => {
      const type = 'application/json; charset=utf-8';
      res.writeHead(200, { 'content-type': type, 'content-length': body.length }).end(body);
    });
    return;
  }
  if (pool) {
    relayByUndici(pool, req, res);
    return;
  }
  const { method, url: path, headers } = req;
  const { hostname: host, port } = upstream;
  const forward = request({ agent, host, port, method, path, headers });
  forward.on('response', (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  forward.on('error', () => res.writeHead(502).end());
  req.pipe(forward);
});
/** Headers of one connection that undici refuses or sets itself. */
const OWN_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'expect']);

/** `headers` without those of one connection. */
const relayed = (headers: Record<string, string | string[] | undefined>) =>
  Object.fromEntries(
    Object.entries(headers).filter(
      ([name, value]) => value !== undefined && !OWN_HEADERS.has(name),
    ),
  );

function relayByUndici(client: Pool, req: IncomingMessage, res: ServerResponse): void {
  const headers = relayed(req.headers);
  const hasBody = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'];
  const handler: Dispatcher.DispatchHandler = {
    onRequestStart() {},
    onResponseStart(controller, statusCode, answerHeaders) {
      res.writeHead(statusCode, relayed(answerHeaders));
      res.on('drain', () => controller.resume());
    },
    onResponseData(controller, chunk) {
      if (!res.write(chunk)) controller.pause();
    },
    onResponseEnd() {
      res.end();
    },
    onResponseError() {
      if (res.headersSent) res.destroy();
      else res.writeHead(502).end();
    },
  };
  const options = { path: req.url ?? '/', method: req.method ?? 'GET' };
  client.dispatch({ ...options, headers, body: hasBody ? req : null }, handler);
}

server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
const port = Number(process.env.BENCH_PORT);
server.listen(port, '127.0.0.1', () =>
  readyUntilParentExits({ port }, () => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  }),
);
