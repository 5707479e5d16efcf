import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

/**
 * What the front does with each new connection: `forward` it to the real Keycloak, `hang`
 * (accept, read, never answer), answer `garbage` (HTTP 200 whose body is not JSON), or be
 * `closed` (nothing listens on the port: connections are refused).
 */
export type FrontMode = 'forward' | 'hang' | 'garbage' | 'closed';

export interface KeycloakFront {
  /** Base URL to give the gateway as Keycloak's, e.g. `http://127.0.0.1:41234/auth`. */
  readonly url: string;
  /** Switches mode; connections open until now are cut, so kept-alive ones cannot bypass it. */
  set(mode: FrontMode): Promise<void>;
  close(): Promise<void>;
}

const GARBAGE =
  'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 18\r\n\r\n<html>hello</html>';

/**
 * A TCP front on a port of its own, in front of the real Keycloak (`keycloakUrl`), that can
 * misbehave on demand: the gateway under test is pointed at it instead of at Keycloak.
 */
export async function startKeycloakFront(keycloakUrl: string): Promise<KeycloakFront> {
  const target = new URL(keycloakUrl);
  const sockets = new Set<Socket>();
  let mode: FrontMode = 'forward';
  let server: Server | undefined;
  let port = 0;

  function serve(client: Socket): void {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => undefined);
    switch (mode) {
      case 'forward': {
        const upstream = connect(Number(target.port), target.hostname);
        sockets.add(upstream);
        upstream.on('close', () => sockets.delete(upstream));
        upstream.on('error', () => client.destroy());
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
        client.pipe(upstream).pipe(client);
        return;
      }
      case 'hang':
        client.resume();
        return;
      case 'garbage':
        client.on('data', () => client.write(GARBAGE));
        return;
      case 'closed':
        client.destroy();
        return;
    }
  }

  async function open(): Promise<void> {
    server = createServer(serve);
    await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  }

  async function shut(): Promise<void> {
    for (const socket of sockets) socket.destroy();
    const closing = server;
    server = undefined;
    if (closing) await new Promise((resolve) => closing.close(resolve));
  }

  await open();
  return {
    url: `http://127.0.0.1:${port}${target.pathname.replace(/\/$/, '')}`,
    async set(next) {
      mode = next;
      for (const socket of sockets) socket.destroy();
      if (next === 'closed' && server) await shut();
      if (next !== 'closed' && !server) await open();
    },
    close: shut,
  };
}
