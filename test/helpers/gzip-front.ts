import { createServer, request, type IncomingMessage } from 'node:http';
import { createGzip } from 'node:zlib';
import { closeServers, listenLocally } from './local-server.ts';

/** An HTTP front before Keycloak that compresses some of its answers, as a reverse proxy may. */
export interface GzipFront {
  /** Base URL to give the gateway as Keycloak's, e.g. `http://127.0.0.1:41234/auth`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Starts a front on a free port before the real Keycloak (`keycloakUrl`) that passes every
 * request on and gzips each answer `compresses` picks for a client whose `Accept-Encoding`
 * names gzip (dropping its `Content-Length`); other answers pass as they came.
 */
export async function startGzipFront(
  keycloakUrl: string,
  compresses: (answer: IncomingMessage) => boolean,
): Promise<GzipFront> {
  const keycloak = new URL(keycloakUrl);
  const server = createServer((req, res) => {
    const sent = request(
      {
        host: keycloak.hostname,
        port: keycloak.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (answer) => {
        if (!compresses(answer) || !/\bgzip\b/.test(String(req.headers['accept-encoding']))) {
          res.writeHead(answer.statusCode!, answer.headers);
          answer.pipe(res);
          return;
        }
        const headers = { ...answer.headers, 'content-encoding': 'gzip' };
        delete headers['content-length'];
        res.writeHead(answer.statusCode!, headers);
        answer.pipe(createGzip()).pipe(res);
      },
    );
    sent.on('error', () => res.destroy());
    req.pipe(sent);
  });
  const base = await listenLocally(server);
  return {
    url: `${base}${keycloak.pathname}`,
    close: () => closeServers(server),
  };
}
