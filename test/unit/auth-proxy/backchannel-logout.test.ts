import type { AddressInfo } from 'node:net';
import { createServer, type Server } from 'node:http';
import express from 'express';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { LogoutTokenVerdict } from '../../../src/auth/bearer/logout-token.ts';
import type { AccessRevocations } from '../../../src/auth-proxy/access-revocations.ts';
import {
  backchannelLogout,
  backchannelLogoutUrlOf,
} from '../../../src/auth-proxy/backchannel-logout.ts';
import { createMemoryCache } from '../../../src/cache/memory-cache.ts';
import { enterScope, type RequestScope } from '../../../src/edge/request-scope.ts';
import type { AuditEntry } from '../../../src/http/audit.ts';
import { REFUSAL_RECORD_INTERVAL_MS } from '../../../src/auth-proxy/refusal-record-limit.ts';

// The endpoint around a verifier that reads its verdict from the token itself: what it does
// with a verdict (once per jti, revocation before the answer, counted, audited) is shown here;
// which tokens are valid, in test/unit/auth/bearer/logout-token.test.ts.

const events: string[] = [];
const counted: string[] = [];
const audited: AuditEntry[] = [];
let release: () => void = () => undefined;
/** Moved on a minute before each test: each test's refusals are recorded afresh. */
let now = 0;
let server: Server;
/** A user whose ending fails `failures` more times. */
const failingUser = { id: 'u-fails', failures: 0 };
let url: string;

const access: Pick<AccessRevocations, 'endSessions' | 'endUser'> = {
  endSessions: (realm: string, sessionIds: readonly string[], userId = '') =>
    Promise.resolve(async () => {
      events.push(`session ${realm} ${sessionIds.join(',')} ${userId}`);
      await new Promise<void>((resolve) => (release = resolve));
      events.push('recorded');
    }),
  endUser: (realm: string, userId: string, tokens: boolean) =>
    Promise.resolve(() => {
      if (userId === failingUser.id && failingUser.failures-- > 0) {
        return Promise.reject(new Error('the revocation store is down'));
      }
      events.push(`user ${realm} ${userId} ${tokens}`);
      return Promise.resolve();
    }),
};

beforeAll(async () => {
  const app = express();
  app.use((req, _res, next) => {
    enterScope(req, { requestId: 'r1' } as RequestScope);
    next();
  });
  app.post(
    '/backchannel-logout',
    backchannelLogout({
      // The token is a JSON verdict: `{"token": ...}` or `{"refused": ...}`.
      verify: (token) => Promise.resolve(JSON.parse(token) as LogoutTokenVerdict),
      access,
      cache: createMemoryCache({ maxEntries: 100 }),
      replayWindowSeconds: 130,
      metrics: { backchannelLogout: (outcome) => counted.push(outcome) },
      audit: { record: (entry) => audited.push(entry) },
      clientAddress: () => '10.0.0.1',
      logger: pino({ level: 'silent' }),
      clock: { now: () => now },
    }),
  );
  server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/backchannel-logout`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
beforeEach(() => {
  now += REFUSAL_RECORD_INTERVAL_MS;
  events.length = 0;
  counted.length = 0;
  audited.length = 0;
});

const token = (jti: string, names: { sessionId?: string; userId?: string }) =>
  JSON.stringify({ token: { realm: 'acme', issuer: 'iss', tokenId: jti, ...names } });

async function post(body: string, type = 'application/x-www-form-urlencoded') {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': type }, body });
  return { status: res.status, cache: res.headers.get('cache-control'), body: await res.text() };
}
const form = (value: string) => new URLSearchParams({ logout_token: value }).toString();

describe('POST /backchannel-logout', () => {
  it('answers 200 only once the revocation is recorded', async () => {
    const answered = post(form(token('j1', { sessionId: 's1', userId: 'u1' }))).then((answer) => {
      events.push('answered');
      return answer;
    });
    await expect.poll(() => events.length).toBe(1);
    release();
    expect(await answered).toEqual({ status: 200, cache: 'no-store', body: '' });
    expect(events).toEqual(['session acme s1 u1', 'recorded', 'answered']);
    expect(counted).toEqual(['accepted']);
    expect(audited).toEqual([
      {
        action: 'backchannel_logout.apply',
        outcome: 'success',
        target: { realm: 'acme', session: 's1', user: 'u1' },
        clientAddress: '10.0.0.1',
        requestId: 'r1',
      },
    ]);
  });

  it('ends every session of the user when the token names `sub` alone', async () => {
    expect((await post(form(token('j2', { userId: 'u2' })))).status).toBe(200);
    expect(events).toEqual(['user acme u2 true']);
  });

  it('refuses a jti seen before, and ends nothing the second time', async () => {
    expect((await post(form(token('j3', { userId: 'u3' })))).status).toBe(200);
    expect(await post(form(token('j3', { userId: 'u3' })))).toEqual({
      status: 400,
      cache: 'no-store',
      body: '{"error":"invalid_request"}',
    });
    expect(events).toEqual(['user acme u3 true']);
    expect(counted).toEqual(['accepted', 'replayed']);
  });

  it('a token whose ending failed (500) is no replay: sent again, it ends the session', async () => {
    failingUser.failures = 1;
    const logout = form(token('j5', { userId: failingUser.id }));
    expect((await post(logout)).status).toBe(500);
    expect(events).toEqual([]);
    expect((await post(logout)).status).toBe(200);
    expect(events).toEqual([`user acme ${failingUser.id} true`]);
    expect(counted).toEqual(['accepted']);
  });

  it.each([
    [
      'a refused token, for its reason',
      form(JSON.stringify({ refused: 'nonce' })),
      undefined,
      'nonce',
    ],
    ['no logout_token', 'other=1', undefined, 'bad_request'],
    ['two logout_token fields', `${form('a')}&${form('b')}`, undefined, 'bad_request'],
    [
      'a body that is no form',
      form(token('j4', { userId: 'u' })),
      'application/json',
      'bad_request',
    ],
    ['a body over 16 KiB', `logout_token=${'a'.repeat(17 * 1024)}`, undefined, 'bad_request'],
  ])('refuses %s: 400, counted, audited, nothing ended', async (_name, body, type, reason) => {
    expect(await post(body, type)).toEqual({
      status: 400,
      cache: 'no-store',
      body: '{"error":"invalid_request"}',
    });
    expect(events).toEqual([]);
    expect(counted).toEqual([reason]);
    expect(audited).toMatchObject([
      { action: 'backchannel_logout.apply', outcome: 'failure', target: { reason } },
    ]);
  });
});

describe('a flood of refusals', () => {
  it('is counted, each one, and recorded once a minute per reason, saying how many were not', async () => {
    const refused = form(JSON.stringify({ refused: 'bad_signature' }));
    for (let i = 0; i < 5; i++) expect((await post(refused)).status).toBe(400);
    expect((await post('other=1')).status).toBe(400);
    now += REFUSAL_RECORD_INTERVAL_MS - 1;
    expect((await post(refused)).status).toBe(400);
    now += 1;
    expect((await post(refused)).status).toBe(400);
    expect(counted).toEqual([
      ...Array<string>(5).fill('bad_signature'),
      'bad_request',
      ...Array<string>(2).fill('bad_signature'),
    ]);
    expect(audited.map((entry) => entry.target)).toEqual([
      { reason: 'bad_signature' },
      { reason: 'bad_request' },
      { reason: 'bad_signature', suppressed: '5' },
    ]);
  });
});

describe('BACKCHANNEL_LOGOUT_URL', () => {
  it("defaults to the admin listener's address, a wildcard host read as the loopback one", () => {
    const url = (ADMIN_HOST: string, BACKCHANNEL_LOGOUT_URL?: string) =>
      backchannelLogoutUrlOf({ ADMIN_HOST, ADMIN_PORT: 8001, BACKCHANNEL_LOGOUT_URL });
    expect(url('0.0.0.0')).toBe('http://127.0.0.1:8001/backchannel-logout');
    expect(url('::')).toBe('http://127.0.0.1:8001/backchannel-logout');
    expect(url('10.1.2.3')).toBe('http://10.1.2.3:8001/backchannel-logout');
    expect(url('fd00::1')).toBe('http://[fd00::1]:8001/backchannel-logout');
    expect(url('0.0.0.0', 'http://gateway:8001/backchannel-logout')).toBe(
      'http://gateway:8001/backchannel-logout',
    );
  });
});
