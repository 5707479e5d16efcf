import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../src/envelope/errors.ts';
import { createIntrospector, REALM_GONE } from '../../src/keycloak/introspection.ts';
import { createKeycloakCalls } from '../../src/keycloak/keycloak-calls.ts';
import {
  createOrganizationRealm,
  createUser,
  disableUser,
  passwordGrantBody,
  postToken,
  type TestUser,
} from '../helpers/keycloak.ts';
import { testEnv } from '../helpers/test-env.ts';

async function accessTokenOf(user: TestUser): Promise<string> {
  const { status, json } = await postToken(
    testEnv().keycloakUrl,
    user.realm,
    passwordGrantBody(user),
  );
  expect(status).toBe(200);
  return String(json.access_token);
}

/** The result code an introspection failed with. */
async function failureOf(promise: Promise<unknown>): Promise<string> {
  const err: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AppError);
  return (err as AppError).result;
}

describe('token introspection against the real Keycloak', () => {
  let realm: string;
  const introspect = () =>
    createIntrospector({
      calls: createKeycloakCalls({ keycloakUrl: testEnv().keycloakUrl, timeoutMs: 5000 }),
      clientSecret: testEnv().gatewayClientSecret,
    });

  beforeAll(async () => {
    realm = await createOrganizationRealm();
  });

  it('says active for a fresh token, inactive once its user is disabled', async () => {
    const user = await createUser(realm);
    const token = await accessTokenOf(user);
    const isActive = introspect();
    expect(await isActive(realm, token)).toBe(true);
    // Several at once on the pooled connections give the same answer.
    expect(await Promise.all([1, 2, 3, 4].map(() => isActive(realm, token)))).toEqual([
      true,
      true,
      true,
      true,
    ]);

    await disableUser(user);
    expect(await isActive(realm, token)).toBe(false);
  });

  it('says inactive for garbage and for a token of another realm', async () => {
    const isActive = introspect();
    expect(await isActive(realm, 'not-a-token')).toBe(false);
    const other = await createOrganizationRealm();
    const token = await accessTokenOf(await createUser(other));
    expect(await isActive(realm, token)).toBe(false);
    expect(await isActive(other, token)).toBe(true);
  });

  it('fails with 502 when Keycloak refuses the gateway client (wrong secret)', async () => {
    const token = await accessTokenOf(await createUser(realm));
    const wrongSecret = createIntrospector({
      calls: createKeycloakCalls({ keycloakUrl: testEnv().keycloakUrl, timeoutMs: 5000 }),
      clientSecret: 'not-the-secret',
    });
    expect(await failureOf(wrongSecret(realm, token))).toBe('502-11001');
  });

  // Keycloak's answer that the realm does not exist is the realm's problem (deleted there), not
  // a bad answer: the re-check refuses the token naming it (deleted-realm-memory.test.ts).
  it('answers REALM_GONE for a realm Keycloak does not have', async () => {
    expect(await introspect()('no-such-realm-here', 'x')).toBe(REALM_GONE);
  });
});

describe('token introspection when Keycloak misbehaves', () => {
  let server: Server;
  let url: string;
  const sockets = new Set<Socket>();
  let answer: (path: string, socket: Socket, end: (status: number, body: string) => void) => void;

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () =>
        answer(req.url ?? '', req.socket, (status, body) => {
          res.writeHead(status, { 'content-type': 'application/json' }).end(body);
        }),
      );
    });
    server.on('connection', (socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/auth`;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  const introspect = (timeoutMs = 2000) =>
    createIntrospector({
      calls: createKeycloakCalls({ keycloakUrl: url, timeoutMs }),
      clientSecret: 's',
    });

  it('503 when nothing listens', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const isActive = createIntrospector({
      calls: createKeycloakCalls({ keycloakUrl: `http://127.0.0.1:${port}/auth`, timeoutMs: 2000 }),
      clientSecret: 's',
    });
    expect(await failureOf(isActive('r', 't'))).toBe('503-11001');
  });

  // Nothing answers, so only a timeout ends the call: 504, caused by the 300 ms given. No
  // stopwatch; a call that hung would fail the test by its timeout.
  it('504 when no answer comes in time', async () => {
    answer = () => undefined;
    const err = await introspect(300)('r', 't').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({
      result: '504-11001',
      cause: { message: 'Keycloak did not answer within 300 ms' },
    });
  });

  it('502 for an answer that is not JSON, lacks "active", or is far too large', async () => {
    for (const body of ['<html>', '{"active":"yes"}', 'null', `{"x":"${'a'.repeat(100_000)}"}`]) {
      answer = (_path, _socket, end) => end(200, body);
      expect(await failureOf(introspect()('r', 't'))).toBe('502-11001');
    }
    answer = (_path, _socket, end) => end(500, '{"active":true}');
    expect(await failureOf(introspect()('r', 't'))).toBe('502-11001');
  });

  it('asks again on a fresh connection when a kept-alive one was closed under it', async () => {
    const isActive = introspect();
    answer = (_path, _socket, end) => end(200, '{"active":true}');
    expect(await isActive('r', 't')).toBe(true);
    // The next request arrives on the kept-alive socket, which the server now drops unanswered
    // (as a server closing an idle connection at that moment would); a new socket is answered.
    let dropped = 0;
    const firstSockets = new Set(sockets);
    answer = (_path, socket, end) => {
      if (firstSockets.has(socket)) {
        dropped++;
        socket.destroy();
      } else end(200, '{"active":false}');
    };
    expect(await isActive('r', 't')).toBe(false);
    expect(dropped).toBe(1);
  });
});
