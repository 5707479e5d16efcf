import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { IDENTITY_HEADERS } from '../../src/outbound/upstream-headers.ts';
import { accessTokenOf, basicAuth } from '../helpers/api.ts';
import { grantReaderRole } from '../helpers/audit-readers.ts';
import {
  claimsOf,
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { rawRequest, type RawResponse } from '../helpers/raw-http.ts';
import {
  startRecordingUpstream,
  type RecordingUpstream,
  type SeenRequest,
} from '../helpers/recording-upstream.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { takeTurns } from '../helpers/turns.ts';

/**
 * Hostile input, from tables, against the real stack: a replica whose automation route forwards
 * to a recording upstream (what really arrives), and the test gateway serving the same routes
 * through express. Every answer must be the envelope with the right status, never a 500, and
 * nothing refused may reach the upstream.
 */

let upstream: RecordingUpstream;
let seen: SeenRequest[];
let replica: Replica;
let org: string;
let member: TestUser;
let bearer: string;
let sub: string;

beforeAll(async () => {
  upstream = await startRecordingUpstream();
  seen = upstream.seen;
  replica = await startReplica(21000, {
    AUTOMATION_UPSTREAM_URL: upstream.url,
    LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
  });
  org = await createOrganization(['ws1', 'ws2']);
  member = await createUser(org, { workspaceRoles: ['ws1'] });
  bearer = `Bearer ${await accessTokenOf(member)}`;
  sub = String(claimsOf(bearer.slice(7)).sub);
});

afterAll(async () => {
  await replica?.gateway.close();
  await upstream?.close();
  await closeTestDb();
});

beforeEach(() => {
  seen.length = 0;
});

const replicaUrl = () => replica.url;
const replicaAdminUrl = () => `http://127.0.0.1:${replica.config.ADMIN_PORT}`;
const gatewayUrl = () => testEnv().publicUrl;

/** A request head with the headers given; `{org}` in the target names the suite's organization. */
function head(method: string, target: string, headers: Record<string, string> = {}): string {
  const lines = [`${method} ${target.replaceAll('{org}', org)} HTTP/1.1`, 'Host: 127.0.0.1'];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  return `${lines.join('\r\n')}\r\n\r\n`;
}

function envelopeOf(response: RawResponse): { result: string; message: string; data: unknown } {
  expect(response.headers['content-type']).toMatch(/^application\/json/);
  const body = JSON.parse(response.body) as { result: string; message: string; data: unknown };
  expect(Object.keys(body).sort()).toEqual(['data', 'message', 'result', 'ts']);
  return body;
}

function expectRefused(response: RawResponse, status: number, result: string): void {
  expect({ status: response.status, result: envelopeOf(response).result }).toEqual({
    status,
    result,
  });
}

/** Path pieces that some peer (a proxy, a framework, the upstream) could read as another path. */
const AMBIGUOUS_PIECES = [
  '../../ws2/ita/x',
  '%2e%2e/%2e%2e/ws2/ita/x',
  '%2E%2E/%2E%2E/ws2/ita/x',
  '.%2e/.%2E/ws2/ita/x',
  '%2e./x',
  './x',
  '%2e/x',
  '..',
  '.',
  '%2E',
  'a%2f..%2f..%2fws2',
  'a%2F..',
  'a%5c..%5cws2',
  'a%5C',
  'a\\..\\ws2',
  '/x',
  'x//y',
  'a;x',
  ';',
  'a%3bx',
  'a%3B',
  'x%00',
  'x%0a',
  'x%0d%0aX-Injected:%201',
  'x%09',
  'x%7f',
  'x%c2%85',
  'x%',
  'x%2',
  'x%zz',
  'x%c3',
  'x%ff',
  'x%fe%ff',
  'x%ed%a0%80',
  'x%c0%ae%c0%ae',
  'x%e0%80%ae',
  '%252e%252e/%252e%252e/ws2',
  'x%25',
  'a"b',
  'a<b>',
  'a|b',
  'a{b}',
  'a^b',
  'a`b',
  'x#frag',
];

const PATH_ROUTES = [
  ['forwarded', '/api/{org}/workspaces/ws1/ita/'],
  ['express', '/api/{org}/platform/'],
  ['auth proxy', '/auth/realms/{org}/'],
] as const;

describe('paths that could be read two ways are refused with 400 400-00001 before routing', () => {
  const cases = PATH_ROUTES.flatMap(([route, prefix]) =>
    AMBIGUOUS_PIECES.flatMap((piece) =>
      (['public', 'admin'] as const).map((listener) => ({
        route,
        listener,
        target: prefix + piece,
      })),
    ),
  );
  it.each(cases)('$route, $listener listener: $target', async ({ listener, target }) => {
    const url = listener === 'public' ? replicaUrl() : replicaAdminUrl();
    const response = await rawRequest(url, head('GET', target, { authorization: bearer }));
    expectRefused(response, 400, '400-00001');
    expect(seen).toEqual([]);
  });

  it('a raw non-ASCII byte and a raw space in the path are refused the same way', async () => {
    for (const target of [
      '/api/{org}/workspaces/ws1/ita/caf\u00e9',
      '/api/{org}/workspaces/w s/ita/x',
    ]) {
      const response = await rawRequest(
        replicaUrl(),
        head('GET', target, { authorization: bearer }),
      );
      expectRefused(response, 400, '400-00001');
    }
    expect(seen).toEqual([]);
  });
});

describe('the forwarded route forwards exactly the path it authorized', () => {
  it('sends one spelling of an encoded path that reads as the workspace the role is on', async () => {
    const response = await rawRequest(
      replicaUrl(),
      head('GET', '/api/{org}/workspaces/%77s1/ita/menu/caf%c3%a9/?q=%2e%2e', {
        authorization: bearer,
      }),
    );
    expect(response.status).toBe(200);
    expect(seen.map((request) => request.url)).toEqual([
      `/api/${org}/workspaces/ws1/ita/menu/caf%C3%A9/?q=%2e%2e`,
    ]);
  });

  it.each(['%77s2', 'ws2', 'WS1', 'Ws1'])(
    'refuses workspace %s to a member of ws1 only',
    async (ws) => {
      const response = await rawRequest(
        replicaUrl(),
        head('GET', `/api/{org}/workspaces/${ws}/ita/menu/x`, { authorization: bearer }),
      );
      expect(response.status === 403 || response.status === 404).toBe(true);
      expect(envelopeOf(response).result).toMatch(/^(403-00001|404-00002)$/);
      expect(seen).toEqual([]);
    },
  );

  it('a path word spelled in capitals names no route and no workspace, on either route', async () => {
    for (const url of [gatewayUrl(), replicaUrl()]) {
      for (const target of [
        '/api/{org}/WORKSPACES/ws2/ita/menu/operation_list/filter/',
        '/api/{org}/workspaces/ws1/ITA/menu/operation_list/filter/',
      ]) {
        const response = await rawRequest(url, head('GET', target, { authorization: bearer }));
        expectRefused(response, 404, '404-00000');
        // The organization's admission still comes first.
        const anonymous = await rawRequest(url, head('GET', target));
        expectRefused(anonymous, 401, '401-00002');
      }
    }
    expect(seen).toEqual([]);
    const upper = await rawRequest(
      gatewayUrl(),
      head('GET', '/API/platform/organizations', { authorization: basicAuth(member) }),
    );
    expectRefused(upper, 404, '404-00000');
  });
});

/** Every byte, percent-encoded, inside an id: a clear 400 or 404, never a 500, never forwarded. */
describe('ids with every byte class', () => {
  const bytes = Array.from({ length: 256 }, (_, byte) => ({
    byte,
    hex: byte.toString(16).toUpperCase().padStart(2, '0'),
  }));
  const mustBeMalformed = (byte: number) =>
    byte < 0x20 || byte >= 0x7f || '/\\%;'.includes(String.fromCharCode(byte));

  it.each(bytes)('workspace id w%$hex on the forwarded route', async ({ byte, hex }) => {
    const response = await rawRequest(
      replicaUrl(),
      head('GET', `/api/{org}/workspaces/w%${hex}/ita/menu/x`, { authorization: bearer }),
    );
    if (mustBeMalformed(byte)) expectRefused(response, 400, '400-00001');
    else expectRefused(response, 404, '404-00002');
    expect(seen).toEqual([]);
  });

  it.each(bytes)('organization id o%$hex on the forwarded route', async ({ byte, hex }) => {
    const response = await rawRequest(
      replicaUrl(),
      head('GET', `/api/o%${hex}/workspaces/ws1/ita/menu/x`, { authorization: bearer }),
    );
    if (mustBeMalformed(byte)) expectRefused(response, 400, '400-00001');
    else expectRefused(response, 404, '404-00001');
    expect(seen).toEqual([]);
  });

  it.each(bytes)('workspace id x%$hex on the express operations route', async ({ byte, hex }) => {
    const response = await rawRequest(
      gatewayUrl(),
      head('GET', `/api/{org}/workspaces/x%${hex}/ita/menu/operation_list/filter/`, {
        authorization: basicAuth(member),
      }),
    );
    if (mustBeMalformed(byte)) expectRefused(response, 400, '400-00001');
    else expectRefused(response, 404, '404-00002');
  });
});

/** Headers a client might use to pose as someone, or to move the upstream's idea of who called. */
const SMUGGLED: Array<[string, string]> = [
  ['user_id', 'admin'],
  ['User-Id', 'admin'],
  ['USER-ID', 'admin'],
  ['user.id', 'admin'],
  ['Roles', Buffer.from('ws2').toString('base64')],
  ['roles', 'd3My'],
  ['ROLES', 'd3My'],
  ['org_roles', 'YWRtaW4='],
  ['Org-Roles', 'YWRtaW4='],
  ['org.roles', 'YWRtaW4='],
  ['Language', 'en'],
  ['language', 'en-US'],
  ['organization_id', 'other-org'],
  ['Organization-Id', 'other-org'],
  ['organization-id', 'other-org'],
  ['ORGANIZATION.ID', 'other-org'],
  ['X-Forwarded-For', '6.6.6.6'],
  ['X-Forwarded-Host', 'evil.example'],
  ['X-Forwarded-Proto', 'https'],
  ['X-Forwarded-Port', '443'],
  ['Forwarded', 'for=6.6.6.6;host=evil.example'],
  ['X-Real-IP', '6.6.6.6'],
  ['X-Client-IP', '6.6.6.6'],
  ['True-Client-IP', '6.6.6.6'],
  ['CF-Connecting-IP', '6.6.6.6'],
  ['Client-IP', '6.6.6.6'],
  ['X-Forwarded', 'for=6.6.6.6'],
  ['X-Forwarded-Ssl', 'on'],
  ['X-Forwarded-Scheme', 'https'],
  ['X-Forwarded-Client-Cert', 'Hash=0;Subject="CN=admin"'],
  ['Proxy', 'http://evil.example:3128'],
  ['Proxy-Foo', 'x'],
  ['x_custom', 'smuggled'],
  ['Connection', 'keep-alive, X-Secret'],
  ['Proxy-Authorization', 'Basic Zm9vOmJhcg=='],
  ['Cookie', 'session=stolen'],
  ['Upgrade', 'websocket'],
  ['TE', 'trailers'],
  ['X-HTTP-Method-Override', 'DELETE'],
  ['X-HTTP-Method', 'DELETE'],
  ['X-Method-Override', 'DELETE'],
  ['X-Original-URL', '/api/other-org/workspaces/ws1/ita/menu/x'],
  ['X-Rewrite-URL', '/api/other-org/workspaces/ws1/ita/menu/x'],
];

describe('identity and forwarding headers reaching the upstream are the gateway own', () => {
  const cases = SMUGGLED.flatMap(([name, value]) =>
    (['basic', 'bearer'] as const).map((method) => ({ name, value, method })),
  );
  it.each(cases)('$name with $method credentials', async ({ name, value, method }) => {
    const authorization = method === 'bearer' ? bearer : basicAuth(member);
    const response = await rawRequest(
      replicaUrl(),
      head('GET', '/api/{org}/workspaces/ws1/ita/menu/x', {
        authorization,
        Connection: 'X-Secret',
        'X-Secret': 'hop-by-hop: named in Connection',
        'X-Trace': 'kept',
        [name]: value,
      }),
    );
    expect(response.status).toBe(200);
    expect(seen).toHaveLength(1);
    const headers = seen[0]!.headers;
    expect(headers['user-id']).toBe(sub);
    expect(Buffer.from(String(headers.roles), 'base64').toString()).toBe('ws1');
    expect(Buffer.from(String(headers['org-roles']), 'base64').toString()).toContain(
      'offline_access',
    );
    expect(headers.language).toBe('ja');
    expect(headers.organization_id).toBe(org);
    expect(headers['x-forwarded-for']).toBe('127.0.0.1');
    expect(headers['x-forwarded-proto']).toBe('http');
    expect(headers['x-forwarded-host']).toBe('127.0.0.1');
    expect(headers['x-trace']).toBe('kept');
    // Nothing else that reads as an identity header, no name with `_` but ours, no client claims.
    const identityFolded = Object.values(IDENTITY_HEADERS).map((name) =>
      name.replace(/[_.]/g, '-'),
    );
    const identityLike = Object.keys(headers).filter((header) =>
      identityFolded.includes(header.replace(/[_.]/g, '-')),
    );
    expect(identityLike.sort()).toEqual([
      'language',
      'org-roles',
      'organization_id',
      'roles',
      'user-id',
    ]);
    // The declaration spells them as they arrive.
    expect(identityLike.sort()).toEqual(Object.values(IDENTITY_HEADERS).sort());
    expect(Object.keys(headers).filter((header) => header.includes('_'))).toEqual([
      'organization_id',
    ]);
    for (const dropped of [
      'authorization',
      'cookie',
      'forwarded',
      'x-real-ip',
      'x-client-ip',
      'true-client-ip',
      'cf-connecting-ip',
      'client-ip',
      'x-forwarded',
      'x-forwarded-port',
      'x-forwarded-ssl',
      'x-forwarded-scheme',
      'x-forwarded-client-cert',
      'proxy',
      'proxy-foo',
      'proxy-authorization',
      'upgrade',
      'te',
      'x-secret',
      'x-http-method-override',
      'x-http-method',
      'x-method-override',
      'x-original-url',
      'x-rewrite-url',
    ]) {
      expect(headers[dropped], dropped).toBeUndefined();
    }
  });
});

describe("the headers the upstream's Connection names stay between it and the gateway", () => {
  it('an answer with Connection: X-Upstream-Secret reaches the client without X-Upstream-Secret', async () => {
    Object.assign(upstream.answerHeaders, {
      connection: 'keep-alive, X-Upstream-Secret',
      'x-upstream-secret': 'internal',
      'x-kept': 'k',
    });
    try {
      const response = await rawRequest(
        replicaUrl(),
        head('GET', '/api/{org}/workspaces/ws1/ita/menu/x', { authorization: bearer }),
      );
      expect(response.status).toBe(200);
      expect(seen).toHaveLength(1);
      expect(response.headers['x-kept']).toBe('k');
      expect(response.headers['x-upstream-secret']).toBeUndefined();
    } finally {
      for (const name of Object.keys(upstream.answerHeaders)) delete upstream.answerHeaders[name];
    }
  });
});

describe('forwarding claims and Proxy headers never reach Keycloak through /auth', () => {
  let front: KeycloakFront;
  let behindFront: Replica;

  beforeAll(async () => {
    front = await startKeycloakFront(testEnv().keycloakUrl);
    behindFront = await startReplica(18470, {
      KEYCLOAK_URL: front.url,
      LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
      REVOCATION_CHECK_SECONDS: 'off',
    });
  });
  afterAll(async () => {
    await behindFront?.gateway.close();
    await front?.close();
  });

  it('a password grant with X-Forwarded-Ssl, X-Forwarded-Client-Cert and Proxy', async () => {
    front.seen.length = 0;
    const body = passwordGrantBody(member);
    const response = await rawRequest(
      behindFront.url,
      head('POST', '/auth/realms/{org}/protocol/openid-connect/token', {
        'content-type': 'application/x-www-form-urlencoded',
        'content-length': String(Buffer.byteLength(body)),
        'X-Forwarded-Ssl': 'on',
        'X-Forwarded-Client-Cert': 'Hash=0;Subject="CN=admin"',
        'X-Forwarded-Server': 'evil.example',
        Proxy: 'http://evil.example:3128',
        'Proxy-Foo': 'x',
      }),
      { body },
    );
    expect(response.status).toBe(200);
    // The proxied grant: the one with the request's id (the gateway's own calls have theirs).
    const requestId = String(response.headers['x-request-id']);
    const grants = front.seen.filter((r) => r.headers['x-request-id'] === requestId);
    expect(grants).toHaveLength(1);
    const names = Object.keys(grants[0]!.headers);
    expect(names.filter((name) => name.startsWith('x-forwarded-')).sort()).toEqual([
      'x-forwarded-for',
      'x-forwarded-host',
      'x-forwarded-port',
      'x-forwarded-proto',
    ]);
    expect(names.filter((name) => name === 'proxy' || name.startsWith('proxy-'))).toEqual([]);
  });
  it('a gzip-compressed grant reaches Keycloak as the plain form the guard read, headed as plain', async () => {
    front.seen.length = 0;
    const form = passwordGrantBody(member);
    const body = gzipSync(form);
    const response = await rawRequest(
      behindFront.url,
      head('POST', '/auth/realms/{org}/protocol/openid-connect/token', {
        'content-type': 'application/x-www-form-urlencoded',
        'content-encoding': 'gzip',
        'content-length': String(body.length),
      }),
      { body },
    );
    expect(response.status).toBe(200);
    const requestId = String(response.headers['x-request-id']);
    const [grant] = front.seen.filter((r) => r.headers['x-request-id'] === requestId);
    expect({
      encoding: grant?.headers['content-encoding'],
      length: grant?.headers['content-length'],
    }).toEqual({ encoding: undefined, length: String(Buffer.byteLength(form)) });
  });
});

describe('behind a trusted proxy, Keycloak is told the client address the gateway vouches for', () => {
  let behindProxy: Replica;

  beforeAll(async () => {
    // The test's connections come from 127.0.0.1: a load balancer the gateway trusts.
    behindProxy = await startReplica(18480, {
      TRUSTED_PROXIES: '127.0.0.1',
      LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
    });
  });
  afterAll(async () => {
    await behindProxy?.gateway.close();
  });

  it('a password grant whose client wrote its own X-Forwarded-For before the proxy appended the real one', async () => {
    const user = await createUser(org);
    // An online session (no offline_access): the user's sessions list it with its address.
    const body = passwordGrantBody(user).replace('+offline_access', '');
    const response = await rawRequest(
      behindProxy.url,
      head('POST', '/auth/realms/{org}/protocol/openid-connect/token', {
        'content-type': 'application/x-www-form-urlencoded',
        'content-length': String(Buffer.byteLength(body)),
        // 10.6.6.6 is the client's own claim; the proxy appended the address it saw. (Both
        // private: Keycloak's realms want HTTPS from any other address.)
        'X-Forwarded-For': '10.6.6.6, 10.9.8.7',
      }),
      { body },
    );
    expect(response.status, response.body).toBe(200);
    // The session Keycloak opened (and the events it records) name the address the gateway
    // vouches for (the login throttle's), not the one the client chose.
    const admin = await keycloakAdmin();
    const sessions = await admin.users.listSessions({ realm: org, id: await userIdOf(user) });
    expect(sessions.map((session) => session.ipAddress)).toEqual(['10.9.8.7']);
  });
});

describe('Expect, Host, methods and framing: always the envelope', () => {
  it('Expect: 100-continue on the token endpoint gets 100 Continue, then the token', async () => {
    const body = passwordGrantBody(member);
    const response = await rawRequest(
      replicaUrl(),
      head('POST', `/auth/realms/{org}/protocol/openid-connect/token`, {
        'content-type': 'application/x-www-form-urlencoded',
        'content-length': String(Buffer.byteLength(body)),
        expect: '100-continue',
      }),
      { body, waitForContinue: true },
    );
    expect(response.statusLines[0]).toBe('HTTP/1.1 100 Continue');
    expect(response.status).toBe(200);
    expect(typeof (JSON.parse(response.body) as { access_token?: unknown }).access_token).toBe(
      'string',
    );
  });

  it('Expect: 100-continue on the forwarded route reaches the upstream with the body, without Expect', async () => {
    const body = '{"x":1}';
    const response = await rawRequest(
      replicaUrl(),
      head('POST', '/api/{org}/workspaces/ws1/ita/menu/x', {
        authorization: bearer,
        'content-type': 'application/json',
        'content-length': String(body.length),
        expect: '100-continue',
      }),
      { body, waitForContinue: true },
    );
    expect(response.statusLines[0]).toBe('HTTP/1.1 100 Continue');
    expect(response.status).toBe(200);
    expect(seen[0]?.body).toBe(body);
    expect(seen[0]?.headers.expect).toBeUndefined();
  });

  it.each([
    '/healthz',
    '/api/platform/organizations',
    '/auth/realms/master/protocol/openid-connect/certs',
    '/api/{org}/workspaces/ws1/ita/x',
  ])('an unknown expectation is 417 in the envelope: %s', async (target) => {
    const response = await rawRequest(
      replicaUrl(),
      head('POST', target, { expect: 'fancy', authorization: bearer }),
    );
    expectRefused(response, 417, '417-00000');
    expect(seen).toEqual([]);
  });

  it.each([
    ['HTTP/1.1 without Host', 'GET /healthz HTTP/1.1\r\n\r\n', 400, '400-00001'],
    ['two Host headers', 'GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n', 400, '400-00001'],
    ['CONNECT', 'CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n', 405, '405-00000'],
    ['OPTIONS *', 'OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n', 400, '400-00001'],
    [
      'absolute form',
      'GET http://evil.example/api/platform/organizations HTTP/1.1\r\nHost: x\r\n\r\n',
      400,
      '400-00001',
    ],
    ['unknown method', 'FROB /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 400, '400-00001'],
    ['lowercase method', 'get /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 400, '400-00001'],
    ['HTTP/2 preface', 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 400, '400-00001'],
    ['bad version', 'GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n', 400, '400-00001'],
    [
      'header without colon',
      'GET /healthz HTTP/1.1\r\nHost: x\r\nbroken\r\n\r\n',
      400,
      '400-00001',
    ],
    ['space before colon', 'GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n', 400, '400-00001'],
    [
      'NUL in a header value',
      'GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\u0000b\r\n\r\n',
      400,
      '400-00001',
    ],
    ['bare LF line ends', 'GET /healthz HTTP/1.1\nHost: x\n\n', 400, '400-00001'],
    [
      'Content-Length with Transfer-Encoding',
      'POST /api/platform/organizations HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
      400,
      '400-00001',
    ],
    [
      'two different Content-Lengths',
      'POST /api/platform/organizations HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd',
      400,
      '400-00001',
    ],
    [
      'Content-Length not a number',
      'POST /api/platform/organizations HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
      400,
      '400-00001',
    ],
    [
      'negative Content-Length',
      'POST /api/platform/organizations HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n',
      400,
      '400-00001',
    ],
    [
      'a transfer coding before chunked (nothing decodes it, the upstream would get it bare)',
      'POST /api/platform/organizations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n',
      400,
      '400-00001',
    ],
    [
      'unknown Transfer-Encoding',
      'POST /api/platform/organizations HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n',
      400,
      '400-00001',
    ],
  ])('%s', async (_name, request, status, result) => {
    const response = await rawRequest(replicaUrl(), request);
    expectRefused(response, status, result);
    expect(seen).toEqual([]);
  });

  it('HTTP/1.0 needs no Host', async () => {
    const response = await rawRequest(replicaUrl(), 'GET /healthz HTTP/1.0\r\n\r\n');
    expect(response.status).toBe(200);
  });

  it('a head over 16 KiB is 431 in the envelope', async () => {
    const response = await rawRequest(
      replicaUrl(),
      head('GET', '/healthz', { 'x-big': 'a'.repeat(20_000) }),
    );
    expectRefused(response, 431, '431-00000');
  });

  it.each(['GET', 'DELETE', 'POST'])(
    'a chunked body on %s reaches the upstream framed, never as a request of its own',
    async (method) => {
      const smuggled = 'GET /smuggled HTTP/1.1\r\nHost: x\r\nUser-Id: admin\r\n\r\n';
      const chunked = `${smuggled.length.toString(16)}\r\n${smuggled}\r\n0\r\n\r\n`;
      const path = '/api/{org}/workspaces/ws1/ita/menu/x';
      const response = await rawRequest(
        replicaUrl(),
        head(method, path, { authorization: bearer, 'transfer-encoding': 'chunked' }) + chunked,
      );
      expect(response.status).toBe(200);
      // A request after it: bytes the upstream read as a request of their own would come first.
      const after = await rawRequest(replicaUrl(), head('GET', path, { authorization: bearer }));
      expect(after.status).toBe(200);
      const forwardedPath = path.replace('{org}', org);
      expect(seen.map(({ method, url, body }) => ({ method, url, body }))).toEqual([
        { method, url: forwardedPath, body: smuggled },
        { method: 'GET', url: forwardedPath, body: '' },
      ]);
    },
  );

  it('a broken chunked body on the forwarded route ends that request only', async () => {
    await rawRequest(
      replicaUrl(),
      head('POST', '/api/{org}/workspaces/ws1/ita/menu/x', {
        authorization: bearer,
        'transfer-encoding': 'chunked',
      }) + 'zz\r\nabc\r\n0\r\n\r\n',
    ).catch(() => undefined);
    const after = await rawRequest(replicaUrl(), head('GET', '/healthz'));
    expect(after.status).toBe(200);
  });
});

describe('the admin console and admin API stay off the public listener in every spelling', () => {
  it.each([
    '/auth/admin/master/console/',
    '/auth/%61dmin/master/console/',
    '/auth/%41DMIN/master/console/',
    '/auth/ADMIN/realms/master',
    '/auth/Admin/realms/master',
    '/auth/admin;x/master/console/',
    '/auth/admin%3Bx/master/console/',
    '/auth/./admin/master/console/',
    '/auth//admin/master/console/',
    '/auth/realms/../admin/master/console/',
    '/auth/realms/%2e%2e/admin/master/console/',
    '/AUTH/admin/master/console/',
  ])('%s', async (target) => {
    const response = await rawRequest(replicaUrl(), head('GET', target));
    expect([400, 404]).toContain(response.status);
    expect(envelopeOf(response).result).toMatch(/^(400-00001|404-00000)$/);
  });

  it('while the admin listener serves the console', async () => {
    // Asked for under the admin listener's own address (any other host name is redirected to it).
    const adminHost = new URL(replica.config.ADMIN_PUBLIC_URL).host;
    const request = head('GET', '/auth/admin/master/console/').replace(
      'Host: 127.0.0.1',
      `Host: ${adminHost}`,
    );
    const response = await rawRequest(replicaAdminUrl(), request);
    expect(response.status).toBe(200);
  });
});

describe("Keycloak's bootstrap administrator cannot be tried, or locked, through the public listener", () => {
  takeTurns('bootstrap-admin-email');
  const tokenPath = '/auth/realms/master/protocol/openid-connect/token';
  const grant = (username: string, password: string) =>
    new URLSearchParams({
      client_id: 'admin-cli',
      grant_type: 'password',
      username,
      password,
    }).toString();

  it('refuses every spelling of its name on the public token endpoint, and Basic on the API', async () => {
    const admin = testEnv().keycloakAdminUsername;
    // Control characters too: Keycloak's login forms trim them as Java does, JavaScript does not.
    for (const username of [
      admin,
      admin.toUpperCase(),
      ` ${admin} `,
      `${admin}\u0001`,
      `\u001f${admin}`,
    ]) {
      const body = grant(username, 'guess');
      const response = await rawRequest(
        gatewayUrl(),
        head('POST', tokenPath, {
          'content-type': 'application/x-www-form-urlencoded',
          'content-length': String(body.length),
        }),
        { body },
      );
      expect(response.status).toBe(400);
      expect(JSON.parse(response.body)).toMatchObject({ error: 'invalid_grant' });
    }
    const basic = await rawRequest(
      gatewayUrl(),
      head('GET', '/api/platform/organizations', {
        authorization: basicAuth({ username: admin, password: 'guess' }),
      }),
    );
    expectRefused(basic, 401, '401-00002');
    // None of it reached Keycloak: no failure counted, no lock.
    const keycloak = await keycloakAdmin();
    const [account] = await keycloak.users.find({ realm: 'master', username: admin, exact: true });
    const status = await keycloak.attackDetection.findOne({ realm: 'master', id: account!.id! });
    expect(Number(status?.numFailures ?? 0)).toBe(0);
    expect(status?.disabled ?? false).toBe(false);
  });

  it('refuses a form that declares a charset in which Keycloak would read its name (UTF-16, EBCDIC)', async () => {
    const admin = testEnv().keycloakAdminUsername;
    const password = encodeURIComponent(testEnv().keycloakAdminPassword);
    // Each byte of the name percent-encoded in the charset named: the guard reads UTF-8.
    const spelled = (bytes: Buffer) =>
      [...bytes].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
    const utf16be = Buffer.from(admin, 'utf16le').swap16();
    const ebcdic = Buffer.from(
      [...admin].map((c) => {
        const i = 'abcdefghijklmnopqrstuvwxyz'.indexOf(c);
        return i < 9 ? 0x81 + i : i < 18 ? 0x91 + i - 9 : 0xa2 + i - 18;
      }),
    );
    for (const [charset, name] of [
      ['UTF-16BE', utf16be],
      ['"utf-16be"', utf16be],
      ['IBM037', ebcdic],
    ] as const) {
      const body = `client_id=admin-cli&grant_type=password&username=${spelled(name)}&password=${password}`;
      const response = await rawRequest(
        gatewayUrl(),
        head('POST', tokenPath, {
          'content-type': `application/x-www-form-urlencoded; charset=${charset}`,
          'content-length': String(body.length),
        }),
        { body },
      );
      expect({
        charset,
        status: response.status,
        body: JSON.parse(response.body) as unknown,
      }).toEqual({
        charset,
        status: 400,
        body: { error: 'invalid_request', error_description: 'Form body must be UTF-8.' },
      });
    }
    // A client that declares Latin-1 for a form in ASCII is read as before.
    const body = grant(admin, 'guess');
    const latin1 = await rawRequest(
      gatewayUrl(),
      head('POST', tokenPath, {
        'content-type': 'application/x-www-form-urlencoded; charset=ISO-8859-1',
        'content-length': String(body.length),
      }),
      { body },
    );
    expect(JSON.parse(latin1.body)).toEqual({
      error: 'invalid_grant',
      error_description: 'This account signs in on the admin listener only.',
    });
  });

  it('refuses an e-mail an operator gave it too, in any case', async () => {
    const admin = testEnv().keycloakAdminUsername;
    const keycloak = await keycloakAdmin();
    const [account] = await keycloak.users.find({ realm: 'master', username: admin, exact: true });
    const email = `bootstrap-${Date.now()}@example.com`;
    await keycloak.users.update({ realm: 'master', id: account!.id! }, { ...account, email });
    try {
      for (const username of [email, email.toUpperCase()]) {
        const body = grant(username, 'guess');
        const response = await rawRequest(
          gatewayUrl(),
          head('POST', tokenPath, {
            'content-type': 'application/x-www-form-urlencoded',
            'content-length': String(body.length),
          }),
          { body },
        );
        expect([response.status, JSON.parse(response.body)]).toEqual([
          400,
          {
            error: 'invalid_grant',
            error_description: 'This account signs in on the admin listener only.',
          },
        ]);
      }
      const status = await keycloak.attackDetection.findOne({ realm: 'master', id: account!.id! });
      expect(Number(status?.numFailures ?? 0)).toBe(0);
    } finally {
      await keycloak.users.update({ realm: 'master', id: account!.id! }, { ...account, email: '' });
    }
  });

  it('while it still signs in on the admin listener', async () => {
    const body = grant(testEnv().keycloakAdminUsername, testEnv().keycloakAdminPassword);
    const response = await fetch(`${testEnv().adminUrl}${tokenPath}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body,
    });
    expect(response.status).toBe(200);
  });
});

/** The listeners' own paths, served beside the API: probes, key sets, resource metadata. */
const OWN_PATHS = [
  '/healthz',
  '/readyz',
  '/.well-known/audit-keys',
  '/.well-known/oauth-protected-resource',
  '/.well-known/oauth-protected-resource/api/platform',
  '/.well-known/oauth-protected-resource/api/{org}',
];

describe("the listeners' own paths are read as written, like the API's", () => {
  const cases = [
    '/HEALTHZ',
    '/Readyz',
    '/.WELL-KNOWN/audit-keys',
    '/.well-known/AUDIT-KEYS',
    '/.well-known/OAUTH-PROTECTED-RESOURCE',
    '/.well-known/oauth-protected-resource/API/platform',
    '/.well-known/oauth-protected-resource/API/{org}',
  ].flatMap((target) => (['public', 'admin'] as const).map((listener) => ({ target, listener })));
  it.each(cases)('$listener listener: $target names nothing', async ({ target, listener }) => {
    const url = listener === 'public' ? replicaUrl() : replicaAdminUrl();
    expectRefused(await rawRequest(url, head('GET', target)), 404, '404-00000');
  });

  it('a resource named in capitals is no resource (RFC 9728 3.3: its metadata would name another)', async () => {
    const response = await rawRequest(
      replicaUrl(),
      head('GET', '/.well-known/oauth-protected-resource/api/PLATFORM'),
    );
    expectRefused(response, 404, '404-00001');
  });
});

describe("a trailing slash on the listeners' own paths", () => {
  const isMetadata = (path: string) => path.startsWith('/.well-known/oauth-protected-resource');
  const onBoth = (paths: string[]) =>
    paths.flatMap((path) => (['public', 'admin'] as const).map((listener) => ({ path, listener })));
  const urlOf = (listener: 'public' | 'admin') =>
    listener === 'public' ? replicaUrl() : replicaAdminUrl();

  // RFC 9728 3.3: metadata names the URL it was fetched from, and `…/api/platform/` is not it.
  it.each(onBoth(OWN_PATHS.filter(isMetadata)))(
    '$listener listener: $path/ is no resource metadata',
    async ({ path, listener }) => {
      expectRefused(await rawRequest(urlOf(listener), head('GET', `${path}/`)), 404, '404-00000');
    },
  );

  it.each(onBoth(OWN_PATHS.filter((path) => !isMetadata(path))))(
    '$listener listener: $path/ answers as $path, as the API takes one slash',
    async ({ path, listener }) => {
      const plain = await rawRequest(urlOf(listener), head('GET', path));
      const slashed = await rawRequest(urlOf(listener), head('GET', `${path}/`));
      expect(slashed.status).toBe(plain.status);
      const resultOf = (body: string) => (JSON.parse(body) as { result: unknown }).result;
      expect(resultOf(slashed.body)).toBe(resultOf(plain.body));
    },
  );
});

describe("OPTIONS on the listeners' own paths is the envelope's 404, as on the API's", () => {
  const cases = OWN_PATHS.flatMap((target) =>
    (['public', 'admin'] as const).map((listener) => ({ target, listener })),
  );
  it.each(cases)('$listener listener: OPTIONS $target', async ({ target, listener }) => {
    const url = listener === 'public' ? replicaUrl() : replicaAdminUrl();
    expectRefused(await rawRequest(url, head('OPTIONS', target)), 404, '404-00000');
  });

  it("while OPTIONS under /auth is still Keycloak's (a browser's preflight)", async () => {
    const response = await rawRequest(replicaUrl(), head('OPTIONS', '/auth/realms/{org}'));
    expect(response.status).toBe(200);
    expect(response.body).not.toContain('404-00000');
  });
});

describe("the audit log's counts are written in digits, or refused", () => {
  let reader: string;

  beforeAll(async () => {
    const user = await createUser(org);
    await grantReaderRole(user);
    reader = basicAuth(user);
  });

  const page = (query: string) =>
    rawRequest(
      gatewayUrl(),
      head('GET', `/api/{org}/platform/audit-log?${query}`, { authorization: reader }),
    );

  it.each([
    // An empty `after` read as 0: with `desc`, an empty page, not a refusal.
    'after=',
    'after=%20',
    'after=0x10',
    'after=1e1',
    'after=1.0',
    'after=%2B1',
    'limit=0x10',
    'limit=1e2',
    'limit=%2010',
    'limit=10.0',
    'limit=0b11',
  ])('%s is 400 400-00002', async (query) => {
    expectRefused(await page(query), 400, '400-00002');
  });

  it.each(['audit-log', 'audit-log/export', 'audit-log/export?format=csv'])(
    '%s: a time range ending before it starts is 400 400-00002, as a download job',
    async (path) => {
      const range = 'from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z';
      const target = `/api/{org}/platform/${path}${path.includes('?') ? '&' : '?'}${range}`;
      const response = await rawRequest(
        gatewayUrl(),
        head('GET', target, { authorization: reader }),
      );
      expectRefused(response, 400, '400-00002');
      expect(envelopeOf(response).message).toBe('to: before from');
      // The same instant at both ends, in two zones, is an empty range, not a reversed one.
      const empty = 'from=2026-11-01T09:00:00%2B09:00&to=2026-11-01T00:00:00Z';
      expect((await page(empty)).status).toBe(200);
    },
  );

  it('any limit is a page when it is 1 to 1000 in digits, else 400 400-00002', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ maxLength: 12 }),
          fc.integer({ min: -5, max: 2000 }).map(String),
          fc.constantFrom('', ' 5', '5 ', '+5', '5.0', '1e2', '0x10', '0o7', 'Infinity'),
        ),
        async (limit) => {
          const response = await page(`limit=${encodeURIComponent(limit)}`);
          const taken = /^[0-9]+$/.test(limit) && Number(limit) >= 1 && Number(limit) <= 1000;
          if (taken) expect(response.status).toBe(200);
          else expectRefused(response, 400, '400-00002');
        },
      ),
      { numRuns: 60 },
    );
  });
});
