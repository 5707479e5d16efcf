import { createServer } from 'node:http';
import { serveUntilParentExits } from './processes.ts';

/**
 * The trivial automation upstream: every request gets the same small JSON body, over
 * keep-alive connections. Runs in its own process (`BENCH_PORT`) so that it does not compete
 * with the gateway's event loop.
 */
const port = Number(process.env.BENCH_PORT);
const body = Buffer.from(
  JSON.stringify({
    data: [{ parameter: { operation_id: 'op-1', operation_name: 'bench' }, file: {} }],
    message: 'SUCCESS',
    result: '000-00000',
    ts: '2025-01-01T00:00:00.000Z',
  }),
);

const server = createServer((req, res) => {
  // Drain any request body before answering, so the connection stays reusable.
  req.resume();
  req.on('end', () => {
    res.writeHead(200, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': body.length,
    });
    res.end(body);
  });
});
serveUntilParentExits(server, port);
