import { Agent, createServer, request } from 'node:http';
import { readyUntilParentExits } from './processes.ts';

/**
 * The two helper servers, each in a process of its own on `BENCH_PORT`, with keep-alive as the
 * gateway has it. `BENCH_UPSTREAM` unset: the trivial automation upstream, the same 156-byte
 * JSON body for every request. Set (`http://host:port`): the **limit**, a minimal `node:http`
 * proxy to it (no framework, no auth, a keep-alive agent).
 */
const body = Buffer.from(
  '{"data":[{"parameter":{"operation_id":"op-1","operation_name":"bench"},"file":{}}],' +
    '"message":"SUCCESS","result":"000-00000","ts":"2025-01-01T00:00:00.000Z"}',
);
const upstream = process.env.BENCH_UPSTREAM ? new URL(process.env.BENCH_UPSTREAM) : undefined;
const agent = new Agent({ keepAlive: true, maxSockets: 1024 });

const server = createServer((req, res) => {
  if (!upstream) {
    req.resume().on('end', () => {
      const type = 'application/json; charset=utf-8';
      res.writeHead(200, { 'content-type': type, 'content-length': body.length }).end(body);
    });
    return;
  }
  const { method, url: path, headers } = req;
  const forward = request({
    agent,
    host: upstream.hostname,
    port: upstream.port,
    method,
    path,
    headers,
  });
  forward.on('response', (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    answer.pipe(res);
  });
  forward.on('error', () => res.writeHead(502).end());
  req.pipe(forward);
});
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
const port = Number(process.env.BENCH_PORT);
server.listen(port, '127.0.0.1', () =>
  readyUntilParentExits({ port }, () => {
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  }),
);
