import type { Server as HttpServer } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';

/** Listens on a free port of 127.0.0.1; resolves with `http://127.0.0.1:<port>`. */
export async function listenLocally(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * Closes the HTTP servers a test opened, one after the other. Kept-alive connections are
 * dropped first: `close` alone would wait for them to time out.
 */
export async function closeServers(...servers: HttpServer[]): Promise<void> {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
}

/** `http://127.0.0.1:<port>` of a port that was free a moment ago: connections are refused. */
export async function refusingBaseUrl(): Promise<string> {
  const server = createServer();
  const base = await listenLocally(server);
  await new Promise((resolve) => server.close(resolve));
  return base;
}
