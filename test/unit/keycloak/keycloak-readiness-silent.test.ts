import { createServer, type Server } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, describe, expect, it } from 'vitest';
import { createHealthRouter } from '../../../src/http/health.router.ts';
import { createLogger } from '../../../src/http/logger.ts';
import { checkKeycloakNodes, sharedNodeProbes } from '../../../src/keycloak/keycloak-health.ts';
import { createKeycloakNodes } from '../../../src/keycloak/keycloak-nodes.ts';

const listening: (Server | net.Server)[] = [];
const accepted = new Set<net.Socket>();
afterAll(async () => {
  for (const socket of accepted) socket.destroy();
  for (const server of listening) await new Promise((resolve) => server.close(resolve));
});

async function listen(server: Server | net.Server): Promise<number> {
  listening.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

describe('/readyz while Keycloak, never reached, accepts connections and never answers', () => {
  it('is not ready (503), at the first request and at one joining the probe in flight', async () => {
    // Accepts and keeps every connection, answers nothing: a hung Keycloak, or a path that
    // drops every packet after the handshake.
    const silent = net.createServer((socket) => {
      accepted.add(socket);
      socket.on('error', () => undefined);
    });
    const silentPort = await listen(silent);
    // The gateway's default KEYCLOAK_TIMEOUT_MS: longer than a readiness check may take.
    const nodes = createKeycloakNodes({
      urls: [`http://127.0.0.1:${silentPort}/auth`],
      timeoutMs: 5000,
    });
    const probes = sharedNodeProbes(nodes);
    const app = express();
    app.use(
      createHealthRouter(
        {
          keycloak: () => checkKeycloakNodes(nodes, undefined, probes),
          database: () => Promise.resolve(),
        },
        () => false,
        createLogger('silent'),
      ),
    );
    const url = `http://127.0.0.1:${await listen(createServer(app))}/readyz`;
    try {
      const firstRes = await fetch(url);
      // The first request's probe is still in flight (5 s): this one joins it.
      const secondRes = await fetch(url);
      for (const res of [firstRes, secondRes]) {
        expect(res.status).toBe(503);
        expect(await res.json()).toMatchObject({
          data: { keycloak: 'down', database: 'up' },
          result: '503-00001',
          message: 'Not ready: Keycloak has not answered since this replica started.',
        });
      }
    } finally {
      nodes.close();
    }
  }, 15_000);
});
