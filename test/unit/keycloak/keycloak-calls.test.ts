import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { calculateJwkThumbprint, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createKeycloakCalls,
  type KeycloakCallKind,
  type KeycloakCallOutcome,
} from '../../../src/keycloak/keycloak-calls.ts';
import { createTokenClient, type PasswordGrantResult } from '../../../src/keycloak/token-client.ts';

/**
 * The layer's HTTP exchange against fake Keycloaks on local sockets: what the socket does decides
 * the status the client sees and the outcome the observer is told.
 */
describe('Keycloak client layer: HTTP exchange', () => {
  let server: Server;
  let port: number;
  const sockets = new Set<Socket>();
  /** What the fake does with each request's bytes. */
  let behave: (socket: Socket) => void;
  /** The last request's first bytes, as received. */
  let lastHead = '';

  beforeAll(async () => {
    server = createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.once('data', (head: Buffer) => {
        lastHead = head.toString('latin1');
        behave(socket);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  const answer = (status: string, body: string) => (socket: Socket) =>
    socket.end(
      `HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );

  async function grant(url: string, timeoutMs = 1000) {
    const seen: [KeycloakCallKind, KeycloakCallOutcome][] = [];
    const calls = createKeycloakCalls({
      keycloakUrl: url,
      timeoutMs,
      observer: { onCall: (kind, outcome) => seen.push([kind, outcome]) },
    });
    const tokens = createTokenClient({
      calls,
      gatewayClientSecret: 's',
      publicUrl: 'http://gateway.example',
    });
    type Failure = { status: number; result: string; cause?: unknown };
    const result: { value?: PasswordGrantResult; error?: Failure } = await tokens
      .passwordGrant('acme', 'alice', 'pw')
      .then(
        (value) => ({ value }),
        (error: unknown) => ({ error: error as Failure }),
      );
    return { ...result, seen };
  }
  const url = () => `http://127.0.0.1:${port}/auth`;

  const granted: unknown = { ok: true, accessToken: 'a.b.c', expiresIn: 60 };

  it('a token: ok', async () => {
    behave = answer('200 OK', '{"access_token":"a.b.c","token_type":"Bearer","expires_in":60}');
    const { value, seen } = await grant(url());
    expect(value).toEqual(granted);
    expect(seen).toEqual([['grant', 'ok']]);
  });

  it("asks without a proof, then with one of the gateway's key, for the URL Keycloak believes it serves, once the client requires it", async () => {
    const heads: string[] = [];
    behave = (socket) => {
      heads.push(lastHead);
      const respond =
        heads.length === 1
          ? answer(
              '400 Bad Request',
              '{"error":"invalid_request","error_description":"DPoP proof is missing"}',
            )
          : answer('200 OK', '{"access_token":"a.b.c","token_type":"DPoP","expires_in":60}');
      respond(socket);
    };
    const { value, seen } = await grant(url());
    expect(heads).toHaveLength(2);
    expect(heads[0]).not.toMatch(/\r\ndpop:/i);
    expect(seen).toEqual([['grant', 'ok']]);
    expect(lastHead.split('\r\n')[0]).toBe(
      'POST /auth/realms/acme/protocol/openid-connect/token HTTP/1.1',
    );
    const proof = /\r\ndpop: ([^\r]+)\r\n/i.exec(lastHead)?.[1] ?? '';
    const [header, claims] = proof
      .split('.')
      .slice(0, 2)
      .map(
        (part) => JSON.parse(Buffer.from(part, 'base64url').toString()) as Record<string, unknown>,
      );
    expect(header).toMatchObject({
      typ: 'dpop+jwt',
      alg: 'ES256',
      jwk: { kty: 'EC', crv: 'P-256' },
    });
    expect(header!.jwk).not.toHaveProperty('d');
    expect(claims).toMatchObject({
      htm: 'POST',
      htu: 'http://gateway.example/auth/realms/acme/protocol/openid-connect/token',
    });
    expect((value as { proofKey: string }).proofKey).toBe(
      await calculateJwkThumbprint(header!.jwk as JWK),
    );
  });

  it("the ID token must name the realm's issuer, PUBLIC_URL/auth/realms/<realm>", async () => {
    const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    const idToken = (iss: string) =>
      `${part({ alg: 'RS256', typ: 'JWT' })}.${part({ iss, aud: '_acme-api', sub: 'u', iat: now, exp: now + 60 })}.c2ln`;
    const answerWith = (iss: string) =>
      answer(
        '200 OK',
        JSON.stringify({
          access_token: 'a.b.c',
          token_type: 'Bearer',
          expires_in: 60,
          id_token: idToken(iss),
        }),
      );
    behave = answerWith('http://gateway.example/auth/realms/acme');
    expect((await grant(url())).value).toEqual(granted);
    behave = answerWith(`${url()}/realms/acme`);
    const { error, seen } = await grant(url());
    expect(error).toMatchObject({ status: 502, result: '502-11001' });
    expect(seen).toEqual([['grant', 'bad_answer']]);
  });

  it('invalid_grant (400 since Keycloak 26.6, 401 before): a refusal, not a failure', async () => {
    for (const status of ['400 Bad Request', '401 Unauthorized']) {
      behave = answer(status, '{"error":"invalid_grant","error_description":"no"}');
      const { value, seen } = await grant(url());
      expect(value).toEqual({ ok: false, error: 'invalid_grant', description: 'no' });
      expect(seen).toEqual([['grant', 'refused']]);
    }
  });

  it('Keycloak starting or behind a proxy that cannot reach it: 503, or 504', async () => {
    for (const [status, translated] of [
      ['503 Service Unavailable', 503],
      ['502 Bad Gateway', 503],
      ['504 Gateway Timeout', 504],
    ] as const) {
      behave = answer(status, '<html>down</html>');
      const { error } = await grant(url());
      expect(error).toMatchObject({ status: translated });
    }
  });

  it('nothing listens: 503', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const { error, seen } = await grant(`http://127.0.0.1:${closedPort}/auth`);
    expect(error).toMatchObject({ status: 503, result: '503-11001' });
    expect(seen).toEqual([['grant', 'unreachable']]);
  });

  // The fake never answers, so only a timeout can end the call; its cause names the one that
  // struck, the 200 ms given. No stopwatch: a shared machine's speed cannot fail this test, and
  // a call that hung would fail it by the test's own timeout.
  it('accepted and never answered: 504 after the timeout', { timeout: 20_000 }, async () => {
    behave = () => undefined;
    const { error, seen } = await grant(url(), 200);
    expect(error).toMatchObject({ status: 504, result: '504-11001' });
    expect(error?.cause).toMatchObject({ message: 'Keycloak did not answer within 200 ms' });
    expect(seen).toEqual([['grant', 'timeout']]);
  });

  it('closed without an answer: 503', async () => {
    behave = (socket) => socket.destroy();
    const { error, seen } = await grant(url());
    expect(error).toMatchObject({ status: 503, result: '503-11001' });
    expect(seen).toEqual([['grant', 'unreachable']]);
  });

  it('garbage: 502, whether HTTP with a body that is not JSON, or not HTTP at all', async () => {
    for (const garbage of [
      answer('200 OK', '<html>hello</html>'),
      answer('200 OK', '{"token_type":"Bearer"}'),
      answer('200 OK', '{"access_token":"","token_type":"Bearer"}'),
      answer('400 Bad Request', '{"error":"unauthorized_client"}'),
      answer('404 Not Found', '<html>'),
      answer('500 Internal Server Error', '{"error":"unknown_error"}'),
      (socket: Socket) => socket.end('SSH-2.0-OpenSSH_9.6\r\n\r\n'),
    ]) {
      behave = garbage;
      const { error, seen } = await grant(url());
      expect(error).toMatchObject({ status: 502, result: '502-11001' });
      expect(seen).toEqual([['grant', 'bad_answer']]);
    }
  });
});
