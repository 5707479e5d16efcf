import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, describe, expect, it } from 'vitest';
import { createHealthRouter } from '../../../src/http/health.router.ts';
import { createLogger } from '../../../src/http/logger.ts';
import { checkKeycloakNodes, sharedNodeProbes } from '../../../src/keycloak/keycloak-health.ts';
import { createKeycloakNodes } from '../../../src/keycloak/keycloak-nodes.ts';

const URLS = ['http://user:secret@kc-0:8080/auth', 'http://kc-1:8080/auth'];

/**
 * `/readyz` of one listener over nodes whose probe answers for the URLs in `answering`; with
 * `answeredBefore`, first once with all of them answering (the replica has reached Keycloak).
 */
async function readyz(
  urls: string[],
  answering: Set<string>,
  detailed: boolean,
  answeredBefore = false,
) {
  let reachable = answeredBefore ? new Set(urls) : answering;
  const nodes = createKeycloakNodes({
    urls,
    timeoutMs: 1000,
    probe: (url) => (reachable.has(url) ? Promise.resolve() : Promise.reject(new Error('no'))),
  });
  await nodes.check();
  reachable = answering;
  const app = express();
  app.use(
    createHealthRouter(
      { keycloak: () => checkKeycloakNodes(nodes), database: () => Promise.resolve() },
      () => false,
      createLogger('silent'),
      detailed,
    ),
  );
  const server: Server = createServer(app);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/readyz`);
  nodes.close();
  return {
    status: res.status,
    body: (await res.json()) as { data: Record<string, unknown>; message: string },
  };
}

const servers: Server[] = [];
afterAll(async () => {
  for (const server of servers) await new Promise((resolve) => server.close(resolve));
});

describe('/readyz with several Keycloak nodes', () => {
  it('admin listener: each node by URL (no credentials), state and since; ready while one answers', async () => {
    const { status, body } = await readyz(URLS, new Set([URLS[1]!]), true);
    expect(status).toBe(200);
    expect(body.data).toMatchObject({
      database: 'up',
      keycloak: {
        status: 'degraded',
        nodes: [
          { url: 'http://kc-0:8080/auth', state: 'down', since: expect.any(String) as string },
          { url: 'http://kc-1:8080/auth', state: 'up', since: expect.any(String) as string },
        ],
      },
    });
    expect(JSON.stringify(body)).not.toContain('secret');
  });

  it('public listener: the status only, never internal addresses', async () => {
    const { status, body } = await readyz(URLS, new Set([URLS[1]!]), false);
    expect(status).toBe(200);
    expect(body.data).toEqual({ keycloak: 'degraded', database: 'up' });
  });

  it('ready but degraded when no node answers any more: what was verified is still served', async () => {
    const { status, body } = await readyz(URLS, new Set(), true, true);
    expect(status).toBe(200);
    expect(body).toMatchObject({
      result: '000-00000',
      message: 'Degraded: keycloak.',
      data: { keycloak: { status: 'down' }, database: 'up' },
    });
  });

  it('not ready when no node has answered since the replica started: it can verify nothing', async () => {
    const { status, body } = await readyz(URLS, new Set(), true);
    expect(status).toBe(503);
    expect(body).toMatchObject({
      result: '503-00001',
      message: 'Not ready: Keycloak has not answered since this replica started.',
      data: { keycloak: { status: 'down' } },
    });
  });

  it('one node keeps the plain shape on both listeners', async () => {
    for (const detailed of [true, false]) {
      expect((await readyz([URLS[1]!], new Set([URLS[1]!]), detailed)).body.data).toEqual({
        keycloak: 'up',
        database: 'up',
      });
      expect(await readyz([URLS[1]!], new Set(), detailed, true)).toMatchObject({
        status: 200,
        body: { data: { keycloak: 'down', database: 'up' } },
      });
    }
  });
});

describe("the readiness check's shared probes", () => {
  it("reuse a node's answer for a second, never its failure, each node on its own", async () => {
    const probed = new Map<string, number>();
    const nodes = createKeycloakNodes({
      urls: URLS,
      timeoutMs: 1000,
      probe: (url) => {
        probed.set(url, (probed.get(url) ?? 0) + 1);
        return url === URLS[1] ? Promise.resolve() : Promise.reject(new Error('no'));
      },
    });
    const check = sharedNodeProbes(nodes);
    const began = performance.now();
    for (let i = 0; i < 20; i++) {
      const report = await checkKeycloakNodes(nodes, undefined, check);
      expect(report.status).toBe('degraded');
    }
    nodes.close();
    // Twenty checks well within a second (else the bound below says how many seconds passed).
    const seconds = Math.ceil((performance.now() - began) / 1000);
    expect(probed.get(URLS[1]!)).toBeLessThanOrEqual(seconds);
    // The node that fails is asked again at each check: it shows at once when it is back.
    expect(probed.get(URLS[0]!)).toBeGreaterThanOrEqual(20);
  });
});
