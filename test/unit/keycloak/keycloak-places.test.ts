import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeycloakCalls } from '../../../src/keycloak/keycloak-calls.ts';

const TIMEOUT_MS = 300;

/*
 * The connections the gateway keeps to one Keycloak node are shared by every call it makes
 * there. A fake node answers its probe (`/realms/master`) at once and holds every other request
 * unanswered, as a Keycloak alive but slow to hash passwords holds grants: one realm's grants
 * must leave places to another realm's grant and to the calls that wait KEYCLOAK_TIMEOUT_MS at
 * most, and a call that finds no place waits no longer than its time limit.
 */
describe('Keycloak calls: places on a node', () => {
  let server: Server;
  let url: string;
  const sockets = new Set<Socket>();
  /** The request line of every request the fake holds. */
  const held: string[] = [];
  /** Set at the end: every connection is cut at once, so what still waits ends. */
  let cutting = false;

  beforeAll(async () => {
    server = createServer((socket) => {
      if (cutting) {
        socket.destroy();
        return;
      }
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
      socket.on('data', (chunk: Buffer) => {
        const line = chunk.toString('latin1').split('\r\n')[0]!;
        if (!/^(GET|POST) /.test(line)) return;
        if (line.startsWith('GET /auth/realms/master ')) {
          socket.write(
            'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}',
          );
        } else held.push(line);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/auth`;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it("one realm's held grants leave a place to another realm's grant and to key-set fetches, and a call without a place fails within its time limit", async () => {
    const calls = createKeycloakCalls({
      keycloakUrl: url,
      timeoutMs: TIMEOUT_MS,
      grantTimeoutMs: 20_000,
    });
    const read = (status: number) => status;
    const grant = (realm: string) =>
      calls
        .send(
          'grant',
          `/realms/${realm}/protocol/openid-connect/token`,
          'grant_type=password',
          read,
        )
        .catch(() => 0);
    const settled = (promise: Promise<unknown>) => {
      const started = performance.now();
      return promise.then(
        () => ({ status: 200, ms: performance.now() - started }),
        (err: { status?: number }) => ({ status: err.status, ms: performance.now() - started }),
      );
    };

    // More grants of one realm than there are connections: held, past KEYCLOAK_TIMEOUT_MS.
    const fleet = Array.from({ length: 40 }, () => grant('fleet'));
    await expect.poll(() => held.length).toBeGreaterThanOrEqual(16);
    await new Promise((resolve) => setTimeout(resolve, 100));

    // Key-set fetches: those that find a place are sent at once; each one ends within its time
    // limit (here all with 504, since the fake holds them too), those that found none included.
    const fetches = Array.from({ length: 16 }, () =>
      settled(calls.send('jwks', '/realms/other/protocol/openid-connect/certs', undefined, read)),
    );
    const ended = await Promise.all(fetches);
    expect(held.filter((line) => line.includes('/certs ')).length).toBeGreaterThan(0);
    for (const { status, ms } of ended) {
      expect(status).toBe(504);
      // Far below the grants' limit (20 s), whatever the machine's load.
      expect(ms).toBeLessThan(5 * TIMEOUT_MS);
    }
    const fleetSent = held.filter((line) => line.includes('/fleet/')).length;
    expect(fleetSent).toBeLessThan(32);

    // Another realm's grant is sent at once.
    void grant('other');
    await expect
      .poll(() => held.filter((line) => line.includes('/realms/other/')).length)
      .toBe(held.filter((line) => line.includes('/certs ')).length + 1);
    expect(held.at(-1)).toBe('POST /auth/realms/other/protocol/openid-connect/token HTTP/1.1');

    cutting = true;
    for (const socket of sockets) socket.destroy();
    await Promise.all(fleet);
  }, 30_000);
});
