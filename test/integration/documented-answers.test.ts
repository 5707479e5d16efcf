import { request } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { expectDocumentedFailure } from '../helpers/documented-answer.ts';
import { randomBytes } from 'node:crypto';
import {
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica } from '../helpers/replica.ts';
import { startDatabaseRelay } from '../helpers/tcp-front.ts';
import { testEnv } from '../helpers/test-env.ts';

interface Answer {
  status: number;
  body: { data: unknown; result: string };
  headers: Headers;
}

/**
 * Sends `body` (bytes as given, `application/json`) with any method, GET included (fetch refuses
 * a GET with a body; the gateway reads one all the same), and reads the envelope.
 */
function send(method: string, path: string, authorization: string, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(`${testEnv().publicUrl}${path}`, {
      method,
      headers: {
        authorization,
        ...(body !== undefined && {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        }),
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const headers = new Headers();
        for (const [name, value] of Object.entries(res.headers)) {
          if (typeof value === 'string') headers.set(name, value);
        }
        resolve({
          status: res.statusCode ?? 0,
          body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Answer['body'],
          headers,
        });
      });
    });
    req.end(body);
  });
}

/** `answer` is `status` `result`, and the OpenAPI document lists that for `operationId`. */
function expectRefused(operationId: string, answer: Answer, status: number, result: string): void {
  expect({ operationId, status: answer.status, result: answer.body.result }).toEqual({
    operationId,
    status,
    result,
  });
  expectDocumentedFailure(operationId, answer);
}

/**
 * What the gateway answers on `/api`, from wherever in the pipeline it is decided (the body
 * reader, the admission's reach step, a path id's schema), is what the OpenAPI document lists
 * for that operation: status and result code.
 */
describe('the answers of the /api pipeline are in the OpenAPI document', () => {
  let org: string;
  let admin: TestUser;
  let member: TestUser;

  beforeAll(async () => {
    org = await createOrganization(['ws1', 'ws2']);
    admin = await createUser('master');
    member = await createUser(org, { workspaceRoles: ['ws1', 'ws2'] });
  });
  afterAll(closeTestDb);

  /** An access token of a job credential: `extra` narrows its reach at issuance. */
  async function narrowedToken(user: TestUser, extra: string): Promise<string> {
    const base = `${testEnv().publicUrl}/auth`;
    const issued = await postToken(base, user.realm, passwordGrantBody(user, extra));
    expect(issued.status).toBe(200);
    return `Bearer ${String(issued.json.access_token)}`;
  }

  it('a body over 64 KiB is 413 on every route that reads one, declared or not', async () => {
    const large = JSON.stringify({ id: 'a'.repeat(70 * 1024), name: 'Too large' });
    const cases: Array<[string, string, string]> = [
      ['createOrganization', 'POST', '/api/platform/organizations'],
      ['revokeRefreshTokensMaster', 'DELETE', '/api/platform/users/_current/refresh_tokens'],
      ['listOrganizations', 'GET', '/api/platform/organizations'],
    ];
    for (const [operationId, method, path] of cases) {
      const answer = await send(method, path, basicAuth(admin), large);
      expectRefused(operationId, answer, 413, '413-00000');
    }
  });

  it('a malformed JSON body is 400-00002 on a route that declares none', async () => {
    const cases: Array<[string, string, string]> = [
      ['revokeRefreshTokensMaster', 'DELETE', '/api/platform/users/_current/refresh_tokens'],
      ['listOrganizations', 'GET', '/api/platform/organizations'],
    ];
    for (const [operationId, method, path] of cases) {
      const answer = await send(method, path, basicAuth(admin), '{');
      expectRefused(operationId, answer, 400, '400-00002');
    }
  });

  it('a read-only token is 403-30002 on every write, master and organization', async () => {
    const adminToken = await narrowedToken(admin, '&realmgate_read_only=true');
    const memberToken = await narrowedToken(member, '&realmgate_read_only=true');
    const cases: Array<[string, string, string, string]> = [
      ['createOrganization', 'POST', '/api/platform/organizations', adminToken],
      [
        'revokeRefreshTokensMaster',
        'DELETE',
        '/api/platform/users/_current/refresh_tokens',
        adminToken,
      ],
      [
        'revokeRefreshTokensOrganization',
        'DELETE',
        `/api/${org}/platform/users/_current/refresh_tokens`,
        memberToken,
      ],
      [
        'setAuditRetentionOrganization',
        'PUT',
        `/api/${org}/platform/audit-log/retention`,
        memberToken,
      ],
    ];
    for (const [operationId, method, path, authorization] of cases) {
      const answer = await send(method, path, authorization, '{}');
      expectRefused(operationId, answer, 403, '403-30002');
    }
  });

  it('a token that reaches one workspace is 403-30001 on another', async () => {
    const token = await narrowedToken(member, '&realmgate_workspaces=ws1');
    const path = `/api/${org}/workspaces/ws2/ita/menu/operation_list/filter/`;
    const answer = await send('GET', path, token);
    expect({ status: answer.status, result: answer.body.result }).toEqual({
      status: 403,
      result: '403-30001',
    });
    expectDocumentedFailure('listOperations', answer);
  });

  it('a throttled password grant is 429 with Retry-After, as the token endpoint documents', async () => {
    // A replica of its own, one failure allowed: the shared gateway's limits stay untouched.
    const replica = await startReplica(18980, {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}documented:`,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
      LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS: '1',
      LOGIN_FAILURE_WINDOW_SECONDS: '120',
    });
    try {
      const throttled = await createUser(org);
      // Two different wrong passwords: a repeated one counts once.
      const grant = (password: string) =>
        postToken(`${replica.url}/auth`, org, passwordGrantBody({ ...throttled, password }));
      expect((await grant('wrong-1')).status).toBe(401);
      const refused = await grant('wrong-2');
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
      expectDocumentedFailure('issueToken', {
        status: refused.status,
        body: refused.json,
        headers: refused.headers,
      });
    } finally {
      await replica.gateway.close();
    }
  });

  it("the token endpoint's refusals, Keycloak's and the gateway's, are documented", async () => {
    const base = `${testEnv().publicUrl}/auth`;
    const client = `client_id=${encodeURIComponent(apiClientIdOf(org))}`;
    const disabled = await createUser(org);
    const keycloak = await keycloakAdmin();
    await keycloak.users.update({ realm: org, id: await userIdOf(disabled) }, { enabled: false });
    const refusals = [
      // Keycloak's own: no grant type, one it does not know, a dead refresh token, a disabled
      // account; then the gateway's: a job credential's field, a wrong password.
      [400, 'invalid_request', client],
      [400, 'unsupported_grant_type', `${client}&grant_type=magic`],
      [400, 'invalid_grant', `${client}&grant_type=refresh_token&refresh_token=not-a-token`],
      [400, 'invalid_grant', passwordGrantBody(disabled)],
      [400, 'invalid_request', passwordGrantBody(member, '&realmgate_expires_in=30')],
      [401, 'invalid_grant', passwordGrantBody({ ...member, password: 'wrong-password-1' })],
    ] as const;
    for (const [status, error, body] of refusals) {
      const refused = await postToken(base, org, body);
      expect({ status: refused.status, error: refused.json.error }).toEqual({ status, error });
      expectDocumentedFailure('issueToken', {
        status: refused.status,
        body: refused.json,
        headers: refused.headers,
      });
    }
  });

  it('a refresh token id over 255 characters names no token: 404-30001, as documented', async () => {
    for (const [operationId, path, user] of [
      ['revokeRefreshTokenMaster', '/api/platform/users/_current/refresh_tokens', admin],
      [
        'revokeRefreshTokenOrganization',
        `/api/${org}/platform/users/_current/refresh_tokens`,
        member,
      ],
    ] as const) {
      const answer = await send('DELETE', `${path}/${'a'.repeat(256)}`, basicAuth(user));
      expectRefused(operationId, answer, 404, '404-30001');
    }
  });

  it('a job credential that could not be recorded is 503 temporarily_unavailable, as the token endpoint documents', async () => {
    // A replica whose database the test cuts once Keycloak has the realm's user.
    const front = await startDatabaseRelay(18986);
    const replica = await startReplica(18984, { DATABASE_URL: front.databaseUrl });
    try {
      const user = await createUser(org);
      const grant = (extra = '') =>
        postToken(`${replica.url}/auth`, org, passwordGrantBody(user, extra));
      expect((await grant()).status).toBe(200);
      await front.cut();
      const refused = await grant('&realmgate_name=nightly');
      expect({ status: refused.status, error: refused.json.error }).toEqual({
        status: 503,
        error: 'temporarily_unavailable',
      });
      expectDocumentedFailure('issueToken', {
        status: refused.status,
        body: refused.json,
        headers: refused.headers,
      });
    } finally {
      await front.restore().catch(() => undefined);
      await replica.gateway.close();
      await front.cut();
    }
  });
});

describe('the answers of the public documents outside /api are in the OpenAPI document', () => {
  /** `head` sent as it is to the gateway's public listener: the status and the JSON body. */
  function sendRaw(head: string): Promise<{ status: number; body: unknown }> {
    const { hostname, port } = new URL(testEnv().publicUrl);
    return new Promise((resolve, reject) => {
      const socket = connect(Number(port), hostname, () => socket.end(head));
      const chunks: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.on('error', reject);
      socket.on('close', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const [status = ''] = /^HTTP\/1\.1 (\d{3})/.exec(text)?.slice(1) ?? [];
        const body = text.slice(text.indexOf('\r\n\r\n') + 4);
        resolve({ status: Number(status), body: JSON.parse(body) as unknown });
      });
    });
  }

  it('the audit keys refused for their request head: 400-00001, as documented', async () => {
    const answer = await sendRaw(
      'GET /.well-known/audit-keys HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n',
    );
    expect({ status: answer.status, result: (answer.body as { result?: unknown }).result }).toEqual(
      { status: 400, result: '400-00001' },
    );
    expectDocumentedFailure('getAuditKeys', answer);
  });

  it('the audit keys read nothing of the request: a query and Accept ignored, another method 404', async () => {
    const keys = `${testEnv().publicUrl}/.well-known/audit-keys`;
    const read = await fetch(`${keys}?format=pem`, { headers: { accept: 'text/html' } });
    expect({ status: read.status, type: read.headers.get('content-type') }).toMatchObject({
      status: 200,
      type: expect.stringMatching(/^application\/jwk-set\+json/) as unknown,
    });
    const posted = await fetch(keys, { method: 'POST' });
    expect({ status: posted.status, body: await posted.json() }).toMatchObject({
      status: 404,
      body: { result: '404-00000' },
    });
  });
});
