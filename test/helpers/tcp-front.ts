import net from 'node:net';
import { testEnv } from './test-env.ts';

/**
 * A TCP relay in front of a service, which a test can cut off as if the service had died, or
 * silence as if it hung or the path to it dropped every packet.
 */
export interface TcpFront {
  readonly port: number;
  /** Drops every relayed connection and refuses new ones (the port closes). */
  cut(): Promise<void>;
  /** Listens again on the same port. */
  restore(): Promise<void>;
  /**
   * Stops forwarding, both ways, on every connection, and accepts new ones without forwarding
   * either: nothing is closed or refused, nothing answers. What is sent meanwhile is held, as
   * TCP would retransmit it, and delivered once the relay forwards again.
   */
  silence(): void;
  /** Forwards again what was held and all that follows. */
  unsilence(): void;
}

export async function startTcpFront(
  port: number,
  target: { host: string; port: number },
): Promise<TcpFront> {
  const sockets = new Set<net.Socket>();
  const pairs = new Set<[net.Socket, net.Socket]>();
  let server: net.Server | undefined;
  let silent = false;

  function listen(): Promise<void> {
    const relay = net.createServer((client) => {
      const upstream = net.connect(target);
      const pair: [net.Socket, net.Socket] = [client, upstream];
      pairs.add(pair);
      for (const socket of pair) {
        sockets.add(socket);
        socket.on('close', () => {
          sockets.delete(socket);
          pairs.delete(pair);
        });
        socket.on('error', () => undefined);
      }
      if (!silent) client.pipe(upstream).pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    server = relay;
    return new Promise((resolve, reject) => {
      relay.once('error', reject);
      relay.listen(port, '127.0.0.1', () => resolve());
    });
  }

  await listen();
  return {
    port,
    async cut() {
      const closed = new Promise<void>((resolve) => server?.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
    restore: listen,
    silence() {
      silent = true;
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    unsilence() {
      silent = false;
      for (const [client, upstream] of pairs) client.pipe(upstream).pipe(client);
    },
  };
}

/** A relay in front of the test Keycloak; `keycloakUrl` reaches it through the relay. */
export interface KeycloakRelay extends TcpFront {
  /** What a gateway in front of this relay takes as KEYCLOAK_URL. */
  readonly keycloakUrl: string;
}

/** The test Keycloak behind a relay on `port` that the test can cut, as if every node had died. */
export async function startKeycloakRelay(port: number): Promise<KeycloakRelay> {
  const direct = new URL(testEnv().keycloakUrl);
  const relay = await startTcpFront(port, { host: direct.hostname, port: Number(direct.port) });
  return { ...relay, keycloakUrl: `http://127.0.0.1:${relay.port}${direct.pathname}` };
}

/** A relay in front of the test PostgreSQL; `databaseUrl` reaches it through the relay. */
export interface DatabaseRelay extends TcpFront {
  /** What a gateway behind this relay takes as DATABASE_URL. */
  readonly databaseUrl: string;
}

/** The test PostgreSQL behind a relay on `port` that the test can cut or silence. */
export async function startDatabaseRelay(port: number): Promise<DatabaseRelay> {
  const database = new URL(testEnv().databaseUrl);
  const relay = await startTcpFront(port, {
    host: database.hostname,
    port: Number(database.port || 5432),
  });
  database.host = `127.0.0.1:${relay.port}`;
  return { ...relay, databaseUrl: database.href };
}
