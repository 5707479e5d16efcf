import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { accessTokenOf, basicAuth } from '../helpers/api.ts';
import { createUser, passwordGrantBody, type TestUser } from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { createLogger } from '../../src/http/logger.ts';
import { testEnv } from '../helpers/test-env.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/**
 * One request followed across the three logs: the `X-Request-Id` a client gets back is the one
 * the automation upstream receives (recording upstream) and the one on every Keycloak call the
 * gateway makes for that request and on `/auth` requests (a recording front before Keycloak).
 */
describe('request ids end to end', () => {
  let upstream: RecordingUpstream;
  let front: KeycloakFront;
  let replica: Replica;
  let org: string;
  let member: TestUser;
  /** The replica's log lines, as written. */
  const logged: Record<string, unknown>[] = [];
  const automation = () => `/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/`;
  /** The request ids Keycloak saw on requests whose path ends with `end`. */
  const idsAtKeycloak = (end: string) =>
    front.seen
      .filter((r) => r.target.split('?')[0]!.endsWith(end))
      .map((r) => r.headers['x-request-id']);

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    front = await startKeycloakFront(testEnv().keycloakUrl);
    replica = await startReplica(
      19200,
      {
        KEYCLOAK_URL: front.url,
        AUTOMATION_UPSTREAM_URL: upstream.url,
        LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
        // No background re-checks nor scheduled key-set fetches: each test sees only the calls
        // its requests made.
        REVOCATION_CHECK_SECONDS: 'off',
        KEY_SET_REFRESH_SECONDS: '3600',
      },
      createLogger('info', {
        write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>),
      }),
    );
    // Its start-up pass over the realms' back-channel logout URL (admin-API calls of no
    // request) is over before any test counts what Keycloak saw.
    const alignment = async () =>
      (
        (await (await fetch(`http://127.0.0.1:19201/readyz`)).json()) as {
          data: { backchannel_logout: { pending?: true } };
        }
      ).data.backchannel_logout.pending;
    await vi.waitFor(async () => expect(await alignment()).toBeUndefined(), EVENTUALLY);
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
  });
  afterAll(async () => {
    await replica?.gateway.close();
    await front?.close();
    await upstream?.close();
    await closeTestDb();
  });
  beforeEach(() => {
    upstream.seen.length = 0;
    front.seen.length = 0;
  });

  it('forwarded route, Bearer: the upstream gets the id the client got, verified or cached', async () => {
    const token = await accessTokenOf(member);
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${replica.url}${automation()}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      expect(res.status).toBe(200);
      ids.push(res.headers.get('x-request-id')!);
    }
    expect(ids[0]).toMatch(UUID);
    expect(ids[1]).toMatch(UUID);
    expect(ids[1]).not.toBe(ids[0]);
    expect(upstream.seen.map((r) => r.headers['x-request-id'])).toEqual(ids);
    // The first request fetched the realm's keys, under its id; the second needed no Keycloak.
    expect(idsAtKeycloak('/certs')).toEqual([ids[0]]);
    expect(front.seen).toHaveLength(1);
  });

  it("forwarded route, Basic: the password grant and the upstream get the request's id", async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const res = await fetch(`${replica.url}${automation()}`, {
      headers: { authorization: basicAuth(user) },
    });
    expect(res.status).toBe(200);
    const id = res.headers.get('x-request-id')!;
    expect(id).toMatch(UUID);
    expect(upstream.seen.map((r) => r.headers['x-request-id'])).toEqual([id]);
    expect(idsAtKeycloak('/protocol/openid-connect/token')).toEqual([id]);
  });

  it("a client's well-formed id is kept, from the answer to the upstream and Keycloak", async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const id = 'client-trace:2026.11.24_0001';
    const res = await fetch(`${replica.url}${automation()}`, {
      headers: { authorization: basicAuth(user), 'x-request-id': id },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-request-id')).toBe(id);
    expect(upstream.seen.map((r) => r.headers['x-request-id'])).toEqual([id]);
    expect(idsAtKeycloak('/protocol/openid-connect/token')).toEqual([id]);
  });

  it('a hostile id (huge, control characters, wrong characters, twice) is replaced', async () => {
    const token = await accessTokenOf(member);
    const hostile = [
      'x'.repeat(8000),
      'a\tb',
      'evil id <script>',
      'id/../..',
      'caf\u00e9',
      'one\r\nX-Request-Id: two',
    ];
    for (const id of hostile) {
      upstream.seen.length = 0;
      const res = await rawRequest(
        replica.url,
        `GET ${automation()} HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${token}\r\n` +
          `X-Request-Id: ${id}\r\nConnection: close\r\n\r\n`,
      );
      expect(res.status, JSON.stringify(id.slice(0, 20))).toBe(200);
      expect(res.headers['x-request-id']).toMatch(UUID);
      expect(upstream.seen.map((r) => r.headers['x-request-id'])).toEqual([
        res.headers['x-request-id'],
      ]);
    }
    // A control character HTTP itself forbids never reaches the gateway's routes: Node refuses
    // the request, in the envelope, with an id of the gateway's.
    upstream.seen.length = 0;
    const refused = await rawRequest(
      replica.url,
      `GET ${automation()} HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer ${token}\r\n` +
        `X-Request-Id: a\u0001b\r\nConnection: close\r\n\r\n`,
    );
    expect(refused.status).toBe(400);
    expect(upstream.seen).toEqual([]);
  });

  it('/auth: the token request reaches Keycloak with the id the client got back', async () => {
    const user = await createUser(org);
    const grant = (headers: Record<string, string>) =>
      fetch(`${replica.url}/auth/realms/${org}/protocol/openid-connect/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: passwordGrantBody(user),
      });
    const given = await grant({});
    expect(given.status).toBe(200);
    const own = await grant({ 'x-request-id': 'cli-login-7' });
    expect(own.status).toBe(200);
    expect(own.headers.get('x-request-id')).toBe('cli-login-7');
    const ids = [given.headers.get('x-request-id'), 'cli-login-7'];
    expect(ids[0]).toMatch(UUID);
    expect(idsAtKeycloak('/protocol/openid-connect/token')).toEqual(ids);
  });

  it('/auth: a hostile id is replaced, and never reaches Keycloak', async () => {
    const user = await createUser(org);
    const body = passwordGrantBody(user);
    for (const id of ['y'.repeat(5000), 'a b', 'x;drop', 'caf\u00e9']) {
      front.seen.length = 0;
      const res = await rawRequest(
        replica.url,
        `POST /auth/realms/${org}/protocol/openid-connect/token HTTP/1.1\r\nHost: gateway\r\n` +
          `Content-Type: application/x-www-form-urlencoded\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
          `X-Request-Id: ${id}\r\nConnection: close\r\n\r\n`,
        { body },
      );
      expect(res.status).toBe(200);
      expect(res.headers['x-request-id']).toMatch(UUID);
      expect(front.seen.map((r) => r.headers['x-request-id'])).toEqual([
        res.headers['x-request-id'],
      ]);
    }
  });

  it("the admin-API calls of a listing carry the request's id", async () => {
    const res = await fetch(`${replica.url}/api/${org}/platform/users/_current/refresh_tokens`, {
      headers: { authorization: basicAuth(member), 'x-request-id': 'list-sessions-1' },
    });
    expect(res.status).toBe(200);
    const admin = front.seen.filter((r) => r.target.includes('/admin/realms/'));
    expect(admin.length).toBeGreaterThan(0);
    expect(admin.map((r) => r.headers['x-request-id'])).toEqual(admin.map(() => 'list-sessions-1'));
  });

  it('a request whose client left before its answer has its access-log line, under its id', async () => {
    const user = await createUser(org);
    // Keycloak's answer to the grant is held: the client gives up before it comes.
    front.hold(/\/protocol\/openid-connect\/token$/, 30_000);
    const gone = new AbortController();
    const answer = fetch(`${replica.url}/auth/realms/${org}/protocol/openid-connect/token`, {
      method: 'POST',
      signal: gone.signal,
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'x-request-id': 'gave-up-1',
      },
      body: passwordGrantBody(user),
    });
    try {
      await vi.waitFor(
        () => expect(idsAtKeycloak('/protocol/openid-connect/token')).toEqual(['gave-up-1']),
        EVENTUALLY,
      );
      gone.abort();
      await expect(answer).rejects.toThrow();
      await vi.waitFor(
        () =>
          expect(logged).toContainEqual(
            expect.objectContaining({
              reqId: 'gave-up-1',
              method: 'POST',
              path: `/auth/realms/${org}/protocol/openid-connect/token`,
            }),
          ),
        EVENTUALLY,
      );
    } finally {
      front.hold(/$^/, 0);
    }
  });
});
