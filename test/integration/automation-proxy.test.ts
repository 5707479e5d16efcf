import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessTokenOf, basicAuth } from '../helpers/api.ts';
import { createUser, disableUser, sessionCount, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

const fromBase64Lines = (value: unknown) =>
  Buffer.from(String(value), 'base64').toString('utf8').split('\n');

/**
 * A gateway replica whose automation route forwards to a recording upstream, on a clock the tests
 * advance past its cache bound.
 */
describe('automation route forwarded to AUTOMATION_UPSTREAM_URL', () => {
  const clock = aheadClock();
  let upstream: RecordingUpstream;
  let replica: Replica;
  let org: string;
  let member: TestUser;
  let outsider: TestUser;
  const seen = () => upstream.seen;

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    replica = await startReplica(
      18300,
      { AUTOMATION_UPSTREAM_URL: upstream.url, BASIC_CACHE_MAX_SECONDS: '3' },
      undefined,
      clock,
    );
    org = await createOrganization(['ws1', 'ws2']);
    member = await createUser(org, { workspaceRoles: ['ws1', 'ws2'] });
    outsider = await createUser(org);
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await upstream?.close();
    await closeTestDb();
  });

  it('forwards with identity headers instead of the client credentials', async () => {
    const token = await accessTokenOf(member);
    seen().length = 0;
    const res = await fetch(
      `${replica.url}/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/?x=1`,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          // Forged identity headers must not reach the upstream.
          'user-id': 'forged',
          roles: Buffer.from('admin').toString('base64'),
          organization_id: 'other-org',
        },
        body: JSON.stringify({ discard: { NORMAL: '0' } }),
      },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(await res.json()).toMatchObject({ data: { from: 'upstream' } });
    expect(seen()).toHaveLength(1);
    const [request] = seen();
    expect(request!.method).toBe('POST');
    expect(request!.url).toBe(`/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/?x=1`);
    expect(request!.body).toBe('{"discard":{"NORMAL":"0"}}');
    expect(request!.headers.authorization).toBeUndefined();
    expect(request!.headers['user-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(fromBase64Lines(request!.headers.roles).sort()).toEqual(['ws1', 'ws2']);
    expect(fromBase64Lines(request!.headers['org-roles'])).toContain('offline_access');
    expect(request!.headers.language).toBe('ja');
    expect(request!.headers.organization_id).toBe(org);
  });

  it('forwards a streamed (chunked) body and repeated headers as received', async () => {
    const token = await accessTokenOf(member);
    seen().length = 0;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"part":1,'));
        controller.enqueue(new TextEncoder().encode('"part2":2}'));
        controller.close();
      },
    });
    const headers = new Headers({ authorization: `Bearer ${token}` });
    headers.append('x-trace', 'a');
    headers.append('x-trace', 'b');
    const res = await fetch(`${replica.url}/api/${org}/workspaces/ws2/ita/upload`, {
      method: 'PUT',
      headers,
      body,
      duplex: 'half',
    });
    expect(res.status).toBe(200);
    expect(seen()).toHaveLength(1);
    expect(seen()[0]!.method).toBe('PUT');
    expect(seen()[0]!.body).toBe('{"part":1,"part2":2}');
    expect(seen()[0]!.headers['x-trace']).toBe('a, b');
    expect(seen()[0]!.headers.authorization).toBeUndefined();
    expect(seen()[0]!.headers.host).toBe(new URL(replica.config.AUTOMATION_UPSTREAM_URL!).host);
  });

  it('refuses a token on the forwarded route at once after its session is revoked', async () => {
    const grant = await fetch(
      `${testEnv().publicUrl}/auth/realms/${org}/protocol/openid-connect/token`,
      {
        method: 'POST',
        body: new URLSearchParams({
          client_id: `_${org}-api`,
          grant_type: 'password',
          scope: 'openid offline_access',
          username: member.username,
          password: member.password,
        }),
      },
    );
    const { access_token: token } = (await grant.json()) as { access_token: string };
    const forwarded = () =>
      fetch(`${replica.url}/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/`, {
        headers: { authorization: `Bearer ${token}` },
      });
    // Twice: the second request finds the token verified already.
    expect((await forwarded()).status).toBe(200);
    expect((await forwarded()).status).toBe(200);
    const revoke = await fetch(`${replica.url}/api/${org}/platform/users/_current/refresh_tokens`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(revoke.status).toBe(200);
    const refused = await forwarded();
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({
      result: '401-00002',
      message: 'Token has been revoked.',
    });
  });

  it('serves a cached Basic login on the forwarded route, within the bounds of the cache', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const forwarded = (authorization: string) =>
      fetch(`${replica.url}/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/`, {
        headers: { authorization },
      });
    // The first request logs in; the next ones reuse the login cached in this replica.
    for (let i = 0; i < 3; i++) expect((await forwarded(basicAuth(user))).status).toBe(200);
    expect(await sessionCount(user)).toBe(1);
    // Another password is another cache entry: Keycloak refuses it.
    const wrong = await forwarded(basicAuth({ ...user, password: `${user.password}x` }));
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toMatchObject({ result: '401-00002' });
    // Revoking the user's refresh tokens voids the cached login and ends its session (it holds
    // the API client): the next request logs in again, in a session of its own.
    const revoke = await fetch(`${replica.url}/api/${org}/platform/users/_current/refresh_tokens`, {
      method: 'DELETE',
      headers: { authorization: basicAuth(user) },
    });
    expect(revoke.status).toBe(200);
    expect((await forwarded(basicAuth(user))).status).toBe(200);
    expect(await sessionCount(user)).toBe(1);
    // A disabled user is refused once BASIC_CACHE_MAX_SECONDS (3 s in this suite) has passed.
    await disableUser(user);
    clock.advance(3500);
    const disabled = await forwarded(basicAuth(user));
    expect(disabled.status).toBe(401);
    expect(await disabled.json()).toMatchObject({ result: '401-00002' });
  });

  it('checks the workspace role before forwarding', async () => {
    seen().length = 0;
    const res = await fetch(
      `${replica.url}/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/`,
      {
        headers: { authorization: basicAuth(outsider) },
      },
    );
    expect(res.status).toBe(403);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(await res.json()).toMatchObject({ result: '403-00001' });
    expect(seen()).toHaveLength(0);
  });

  it('reads Bearer headers with extra spaces as before and refuses malformed tokens', async () => {
    const token = await accessTokenOf(member);
    const url = `${replica.url}/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/`;
    const statusWith = async (authorization: string) =>
      (await fetch(url, { headers: { authorization, 'x-request-id': 'trace-1' } })).status;
    expect(await statusWith(`Bearer   ${token}  `)).toBe(200);
    expect(await statusWith(`bearer ${token}`)).toBe(200);
    const refused = await fetch(url, {
      headers: { authorization: `Bearer ${token}!`, 'x-request-id': 'trace-2' },
    });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('x-request-id')).toBe('trace-2');
    expect(await refused.json()).toMatchObject({
      result: '401-00002',
      message: 'Malformed token.',
    });
  });

  it('answers 503 in the envelope when the upstream is down', async () => {
    await upstream.close();
    const res = await fetch(
      `${replica.url}/api/${org}/workspaces/ws2/ita/menu/operation_list/filter/`,
      {
        headers: { authorization: basicAuth(member) },
      },
    );
    expect(res.status).toBe(503);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect(await res.json()).toMatchObject({ data: null, result: '503-00002' });
  });
});

describe('automation route when the upstream does not answer', () => {
  let silent: Server;
  let replica: Replica;
  let org: string;
  let member: TestUser;

  beforeAll(async () => {
    // Accepts the request and never answers it.
    silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    replica = await startReplica(18310, {
      AUTOMATION_UPSTREAM_URL: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`,
      AUTH_PROXY_TIMEOUT_MS: '300',
    });
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
  });

  afterAll(async () => {
    await replica?.gateway.close();
    silent?.closeAllConnections();
    await new Promise((resolve) => silent?.close(resolve));
    await closeTestDb();
  });

  it('answers 504 in the envelope after AUTH_PROXY_TIMEOUT_MS, every time', async () => {
    const url = `${replica.url}/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/`;
    for (let attempt = 0; attempt < 2; attempt++) {
      const started = Date.now();
      const res = await fetch(url, { headers: { authorization: basicAuth(member) } });
      expect(res.status).toBe(504);
      expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
      expect(await res.json()).toMatchObject({ data: null, result: '504-00001' });
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    }
  });
});
