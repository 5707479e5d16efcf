import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One request as it reached the upstream. */
export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** The address the request came from (the host of a replica on another machine). */
  remoteAddress: string;
}

export interface RecordingUpstream {
  url: string;
  /** Every request received so far, in order; tests empty it between cases. */
  seen: SeenRequest[];
  /** Headers added to every answer from now on (a test sets and empties it). */
  answerHeaders: Record<string, string>;
  /** Stops listening and drops kept-alive connections: the upstream is gone. */
  close(): Promise<void>;
}

/**
 * An automation service stand-in that records what really arrives (method, path, headers,
 * body) and answers 200 in the envelope, so tests can show what the gateway forwards. On
 * `host` (loopback unless told otherwise: the compose suite's containers reach it from a network
 * of their own).
 */
export async function startRecordingUpstream(host = '127.0.0.1'): Promise<RecordingUpstream> {
  const seen: SeenRequest[] = [];
  const answerHeaders: Record<string, string> = {};
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      seen.push({
        method: req.method!,
        url: req.url!,
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
        remoteAddress: req.socket.remoteAddress ?? '',
      });
      res.setHeader('content-type', 'application/json');
      for (const [name, value] of Object.entries(answerHeaders)) res.setHeader(name, value);
      res.end(
        JSON.stringify({
          data: { from: 'upstream' },
          message: 'SUCCESS',
          result: '000-00000',
          ts: new Date().toISOString(),
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    url: `http://${host}:${(server.address() as AddressInfo).port}`,
    seen,
    answerHeaders,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
