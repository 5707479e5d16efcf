import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Admission } from '../../../src/auth/admission.ts';
import type { Principal } from '../../../src/tenancy/principal.ts';
import { FORWARDED_PATH, startForwardedGateway } from '../../helpers/forwarded-gateway.ts';

const principal = (locale: string): Principal => ({
  realm: 'acme',
  userId: 'user-1',
  username: 'alice',
  realmRoles: [],
  clientRoles: { 'acme-workspaces': ['ws1'] },
  locale,
  method: 'bearer',
  sessionId: undefined,
  issuedAt: 0,
  expiresAt: Number.MAX_SAFE_INTEGER,
});

/**
 * The promise-free path must not be able to end the process: here an admission hands the
 * forwarder a principal whose locale Node refuses as a header value (the validation that
 * prevents this in real tokens is bypassed on purpose), so `request()` throws synchronously.
 */
describe('an exception on the forwarded route fast path', () => {
  let upstream: Server;
  let gateway: Server;
  let base: string;
  const forwarded: string[] = [];

  beforeAll(async () => {
    upstream = createServer((req, res) => {
      forwarded.push(String(req.headers.language));
      res.end('{}');
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    // Answers at once, as for a principal the process knows.
    const admission: Admission = {
      admit: (_target, req) =>
        principal(req.headers.authorization === 'bad' ? 'ja\r\nX-Injected: 1' : 'en'),
      challenged: (err) => err,
    };
    const started = await startForwardedGateway({
      upstreamUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      admission,
    });
    gateway = started.server;
    base = `${started.base}${FORWARDED_PATH}`;
  });

  afterAll(async () => {
    await new Promise((resolve) => gateway?.close(resolve));
    await new Promise((resolve) => upstream?.close(resolve));
  });

  it('answers that request 500 in the envelope and goes on serving', async () => {
    const failed = await fetch(base, { headers: { authorization: 'bad' } });
    expect(failed.status).toBe(500);
    expect(await failed.json()).toMatchObject({ result: '500-99999', data: null });
    expect(failed.headers.get('x-request-id')).toBeTruthy();
    const next = await fetch(base, { headers: { authorization: 'good' } });
    expect(next.status).toBe(200);
    expect(forwarded).toEqual(['en']);
  });
});
