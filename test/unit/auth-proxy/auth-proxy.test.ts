import {
  createServer,
  type IncomingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import type { RequestHandler } from 'express';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { beforeAnswer } from '../../../src/auth-proxy/auth-proxy.ts';
import type { AnswerBody } from '../../../src/auth-proxy/hooked-answer.ts';
import { guardFormBody } from '../../../src/auth-proxy/form-body-guard.ts';
import { createKeycloakNodes, type KeycloakNodes } from '../../../src/keycloak/keycloak-nodes.ts';
import { startAuthProxyGateway } from '../../helpers/auth-proxy-gateway.ts';
import { struckByHand } from '../../helpers/struck-timer.ts';
import { closeServers, listenLocally } from '../../helpers/local-server.ts';

/** What the fake Keycloak got: the request head and its body. */
interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** Resolves when the gateway's request to Keycloak closes. */
  closed: Promise<void>;
}

/** The `/auth` proxy's own forwarding, against a fake Keycloak that records what arrives. */
describe('/auth proxy: what reaches Keycloak and what comes back', () => {
  const seen: Seen[] = [];
  /** How the fake answers a request it has read whole. */
  let answer: (res: ServerResponse) => void;
  let keycloak: Server;
  let gateway: Server;
  let nodes: KeycloakNodes;
  let base: string;

  beforeAll(async () => {
    keycloak = createServer((req, res) => {
      const chunks: Buffer[] = [];
      const closed = new Promise<void>((resolve) => req.once('close', () => resolve()));
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString();
        seen.push({ method: req.method!, url: req.url!, headers: req.headers, body, closed });
        answer(res);
      });
    });
    const keycloakUrl = `${await listenLocally(keycloak)}/auth`;
    nodes = createKeycloakNodes({ urls: [keycloakUrl, keycloakUrl], timeoutMs: 1000 });
    ({ server: gateway, base } = await startAuthProxyGateway(guardFormBody(), {
      nodes,
      publicUrl: 'https://gateway.example:8443',
      timeoutMs: 300,
      answerDeadlineMs: 300_000,
    }));
  });
  afterAll(async () => {
    nodes.close();
    await closeServers(gateway, keycloak);
  });
  beforeEach(() => {
    seen.length = 0;
    answer = (res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });

  it("sends the node's Host, X-Forwarded-* naming PUBLIC_URL, and none of the client's claims", async () => {
    const res = await fetch(`${base}/auth/realms/acme/protocol/openid-connect/token?x=1`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: 'Basic Y2xpZW50OnNlY3JldA==',
        cookie: 'KC_RESTART=abc',
        'x-forwarded-host': 'evil.example',
        'x-forwarded-proto': 'http',
        'x-forwarded-for': '6.6.6.6',
        'x-request-id': 'from-the-client',
        user_id: 'forged',
      },
      body: 'grant_type=password&username=u&password=p',
    });
    expect(res.status).toBe(200);
    const [request] = seen;
    expect(request).toMatchObject({
      method: 'POST',
      url: '/auth/realms/acme/protocol/openid-connect/token?x=1',
      body: 'grant_type=password&username=u&password=p',
    });
    expect(request!.headers).toMatchObject({
      host: `127.0.0.1:${(keycloak.address() as AddressInfo).port}`,
      'x-forwarded-host': 'gateway.example:8443',
      'x-forwarded-proto': 'https',
      'x-forwarded-port': '8443',
      'x-forwarded-for': '127.0.0.1',
      'content-length': String('grant_type=password&username=u&password=p'.length),
      authorization: 'Basic Y2xpZW50OnNlY3JldA==',
      cookie: 'KC_RESTART=abc',
    });
    expect(request!.headers['x-request-id']).toBeUndefined();
    expect(request!.headers.user_id).toBeUndefined();
  });

  it('streams a body it has not read, re-chunking one of unknown length', async () => {
    const json = JSON.stringify({ enabled: true, pad: 'x'.repeat(100_000) });
    const streamed = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(json.slice(0, 50_000)));
        controller.enqueue(new TextEncoder().encode(json.slice(50_000)));
        controller.close();
      },
    });
    const res = await fetch(`${base}/auth/admin/realms/acme`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: streamed,
      duplex: 'half',
    });
    expect(res.status).toBe(200);
    expect(seen[0]).toMatchObject({ method: 'PUT', url: '/auth/admin/realms/acme', body: json });
    expect(seen[0]!.headers['transfer-encoding']).toBe('chunked');
  });

  it("passes Keycloak's answer on, but not its connection headers nor a request id", async () => {
    answer = (res) =>
      res
        .writeHead(302, {
          location: 'https://gateway.example:8443/auth/realms/acme/account',
          'set-cookie': ['a=1; Path=/auth', 'b=2; Path=/auth'],
          'proxy-authenticate': 'Basic realm="keycloak"',
          'x-request-id': 'keycloak-made-this-up',
          'cache-control': 'no-store',
        })
        .end();
    const res = await fetch(`${base}/auth/realms/acme/account`, { redirect: 'manual' });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe(
      'https://gateway.example:8443/auth/realms/acme/account',
    );
    expect(res.headers.getSetCookie()).toEqual(['a=1; Path=/auth', 'b=2; Path=/auth']);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.headers.get('proxy-authenticate')).toBeNull();
    expect(res.headers.get('x-request-id')).toBeNull();
  });

  it('answers 504 in the envelope when Keycloak stays silent', async () => {
    answer = () => undefined;
    const res = await fetch(`${base}/auth/realms/acme`);
    expect(res.status).toBe(504);
    expect(await res.json()).toMatchObject({ data: null, result: '504-11001' });
    // Out once its probe stays silent too (a busy node would answer it and stay in).
    await vi.waitFor(() => expect(nodes.all.some((node) => node.state === 'down')).toBe(true), {
      timeout: 10_000,
    });
    // It answers again: the probe puts the node back.
    answer = (res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    await vi.waitFor(() => expect(nodes.all.every((node) => node.state === 'up')).toBe(true), {
      timeout: 10_000,
    });
  });

  it('closes the request to Keycloak when the client leaves, and keeps the node in', async () => {
    answer = () => undefined;
    const client = connect((gateway.address() as AddressInfo).port, '127.0.0.1');
    client.write('GET /auth/realms/acme HTTP/1.1\r\nHost: gateway\r\n\r\n');
    // The proxied request, not a probe of the test before's.
    const proxied = () => seen.find((request) => request.url === '/auth/realms/acme');
    await vi.waitFor(() => expect(proxied()).toBeDefined());
    client.destroy();
    await proxied()!.closed;
    expect(nodes.all.map((node) => node.state)).toEqual(['up', 'up']);
  });
});

/** A step before the proxy (end-access.ts) acting on Keycloak's answer before the client has it. */
describe('/auth proxy: a hook on the answer', () => {
  let keycloak: Server;
  let gateway: Server;
  let nodes: KeycloakNodes;
  let base: string;
  let hook: (status: number, body: AnswerBody | undefined) => Promise<void>;
  let readsBody = false;
  const marker = Buffer.from('/logout/logout-confirm');
  let keycloakAnswer: (res: ServerResponse) => unknown = (res) => res.writeHead(204).end();
  const silence = struckByHand();

  beforeAll(async () => {
    keycloak = createServer((_req, res) => keycloakAnswer(res));
    nodes = createKeycloakNodes({
      urls: [`${await listenLocally(keycloak)}/auth`],
      timeoutMs: 1000,
    });
    const hookStep: RequestHandler = (req, _res, next) => {
      beforeAnswer(req, (status, body) => hook(status, body), { readsBody, marker });
      next();
    };
    ({ server: gateway, base } = await startAuthProxyGateway([hookStep], {
      nodes,
      publicUrl: 'https://gateway.example:8443',
      timeoutMs: 100,
      answerDeadlineMs: 300_000,
      startTimer: silence.start,
    }));
  });
  afterAll(async () => {
    nodes.close();
    await closeServers(gateway, keycloak);
  });

  it("runs with Keycloak's status, and the client gets the answer only once it is done", async () => {
    // Keycloak's answer begins, and ends only once the test says: the hook runs in between.
    let keycloakEnds = () => {};
    keycloakAnswer = (res) => {
      res.writeHead(200, { 'content-type': 'text/plain' }).write('logged ');
      keycloakEnds = () => res.end('out');
    };
    let finish = () => {};
    const done = new Promise<void>((resolve) => (finish = resolve));
    const called = new Promise<number>((resolve) => {
      hook = (status) => {
        resolve(status);
        return done;
      };
    });
    let answered = false;
    const response = fetch(`${base}/auth/realms/acme/protocol/openid-connect/logout`, {
      method: 'POST',
    }).then((res) => {
      answered = true;
      return res;
    });
    try {
      expect(await called).toBe(200);
      expect(answered).toBe(false);
      // Keycloak's allowed silence runs out while the hook works: the gateway is the one busy,
      // and the answer must still be Keycloak's, not a 504 or a cut connection.
      expect(silence.strike()).toBe(true);
      keycloakEnds();
      finish();
      const res = await response;
      expect(res.status).toBe(200);
      expect(await res.text()).toBe('logged out');
    } finally {
      keycloakAnswer = (res) => res.writeHead(204).end();
    }
  });

  it('reads an answer larger than it holds as it streams: the marker across two chunks, the client the page whole once the hook is done', async () => {
    // A page of 40 KiB whose marker is split between two of Keycloak's writes, past 16 KiB.
    const before = 'a'.repeat(30 * 1024);
    const after = 'z'.repeat(10 * 1024);
    let keycloakEnds = () => {};
    const begun = new Promise<void>((resolve) => {
      keycloakAnswer = (res) => {
        res.writeHead(200, { 'content-type': 'text/html' });
        res.write(before + marker.subarray(0, 9).toString());
        keycloakEnds = () => res.end(marker.subarray(9).toString() + after);
        resolve();
      };
    });
    readsBody = true;
    let finish = () => {};
    const done = new Promise<void>((resolve) => (finish = resolve));
    const called = new Promise<AnswerBody | undefined>((resolve) => {
      hook = (_status, body) => {
        resolve(body);
        return done;
      };
    });
    let read = false;
    const page = fetch(`${base}/auth/realms/acme/protocol/openid-connect/logout`).then(
      async (res) => {
        const text = await res.text();
        read = true;
        return text;
      },
    );
    try {
      await begun;
      keycloakEnds();
      const whole = before + marker.toString() + after;
      expect(await called).toEqual({ bytes: whole.length, marked: true });
      // Its last chunk waits for the hook.
      expect(read).toBe(false);
      finish();
      expect(await page).toBe(whole);
    } finally {
      readsBody = false;
      keycloakAnswer = (res) => res.writeHead(204).end();
    }
  });

  it("hands a hook that reads it Keycloak's body, and the client the same answer after it", async () => {
    const refusal = '{"error":"invalid_token","error_description":"Invalid token"}';
    keycloakAnswer = (res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(refusal);
    readsBody = true;
    let seen: { status: number; body: AnswerBody | undefined } | undefined;
    hook = (status, body) => {
      seen = { status, body };
      return Promise.resolve();
    };
    try {
      const res = await fetch(`${base}/auth/realms/acme/protocol/openid-connect/revoke`, {
        method: 'POST',
      });
      expect(seen).toEqual({ status: 200, body: { bytes: refusal.length, marked: false } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(await res.text()).toBe(refusal);
    } finally {
      readsBody = false;
      keycloakAnswer = (res) => res.writeHead(204).end();
    }
  });
});
