import { Agent, createServer, request } from 'node:http';
import { serveUntilParentExits } from './processes.ts';

/**
 * The "limit" reference: a minimal hand-written `node:http` proxy (no framework, no auth) with a
 * keep-alive agent, in front of the same upstream. `BENCH_PORT` to listen on, `BENCH_UPSTREAM`
 * (`http://host:port`) to forward to.
 */
const port = Number(process.env.BENCH_PORT);
const upstream = new URL(process.env.BENCH_UPSTREAM ?? '');
const agent = new Agent({ keepAlive: true, maxSockets: 1024 });

const server = createServer((req, res) => {
  const forward = request(
    {
      agent,
      host: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers: req.headers,
    },
    (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    },
  );
  forward.on('error', () => {
    res.writeHead(502);
    res.end();
  });
  req.pipe(forward);
});
serveUntilParentExits(server, port);
