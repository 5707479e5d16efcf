import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { inRequest, outsideRequest } from '../../../src/edge/request-context.ts';
import { createAdminClient } from '../../../src/keycloak/admin-client.ts';
import { createKeycloakCalls } from '../../../src/keycloak/keycloak-calls.ts';
import { createTokenClient } from '../../../src/keycloak/token-client.ts';
import { closeServers, listenLocally } from '../../helpers/local-server.ts';

const base64url = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
const TOKEN = `${base64url({ alg: 'none' })}.${base64url({ exp: 4102444800, iat: 1 })}.x`;

/** The gateway's own Keycloak calls carry the id of the request they are made for. */
describe('request id on the Keycloak calls', () => {
  let server: Server;
  let url: string;
  /** What each request brought: `METHOD path` and its headers. */
  const seen: { call: string; headers: IncomingHttpHeaders }[] = [];
  /** Answers held back, and how many calls are answered together once they have all arrived. */
  const waiting: (() => void)[] = [];
  let together = 1;

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push({ call: `${req.method} ${req.url}`, headers: req.headers });
      req.resume();
      req.on('end', () => {
        res.setHeader('content-type', 'application/json');
        const body =
          req.method === 'POST'
            ? JSON.stringify({
                access_token: TOKEN,
                token_type: 'Bearer',
                expires_in: 60,
                active: true,
              })
            : '[]';
        // Held until the test's calls have all arrived, so that calls of several requests overlap.
        waiting.push(() => res.end(body));
        if (waiting.length >= together) for (const answer of waiting.splice(0)) answer();
      });
    });
    url = `${await listenLocally(server)}/auth`;
  });
  afterAll(async () => {
    await closeServers(server);
  });
  beforeEach(() => {
    seen.length = 0;
    together = 1;
  });

  const idsSeen = () => seen.map(({ call, headers }) => [call, headers['x-request-id']]);

  it('grants and introspections: the id of the request they run for, none outside one', async () => {
    const tokens = createTokenClient({
      calls: createKeycloakCalls({ keycloakUrl: url, timeoutMs: 2000 }),
      gatewayClientSecret: 's',
      publicUrl: 'http://gateway.example',
    });
    together = 4;
    await Promise.all([
      inRequest('req-a', () => tokens.passwordGrant('acme', 'alice', 'pw')),
      inRequest('req-b', async () => {
        // Starts after the others: its call overlaps theirs (all four are answered together).
        await new Promise((resolve) => setImmediate(resolve));
        return tokens.isActive('acme', 'a.b.c');
      }),
      inRequest('req-c', () => outsideRequest(() => tokens.isActive('acme', 'x.y.z'))),
      tokens.passwordGrant('acme', 'bob', 'pw'),
    ]);
    const grant = 'POST /auth/realms/acme/protocol/openid-connect/token';
    const introspect = 'POST /auth/realms/acme/protocol/openid-connect/token/introspect';
    expect(idsSeen().sort()).toEqual(
      [
        [grant, 'req-a'],
        [introspect, 'req-b'],
        [introspect, undefined],
        [grant, undefined],
      ].sort(),
    );
  });

  it("admin-API requests: the request's id; the client's own login: none", async () => {
    const calls = createKeycloakCalls({ keycloakUrl: url, timeoutMs: 2000 });
    const client = createAdminClient(calls, 'master');
    await inRequest('req-login', () =>
      client.auth({ grantType: 'client_credentials', clientId: 'c', clientSecret: 's' }),
    );
    together = 3;
    await Promise.all([
      inRequest('req-1', () => client.users.find({ username: 'one' })),
      inRequest('req-2', () => client.users.find({ username: 'two' })),
      client.users.find({ username: 'none' }),
    ]);
    expect(idsSeen()).toEqual(
      expect.arrayContaining([
        ['POST /auth/realms/master/protocol/openid-connect/token', undefined],
        ['GET /auth/admin/realms/master/users/?username=one', 'req-1'],
        ['GET /auth/admin/realms/master/users/?username=two', 'req-2'],
        ['GET /auth/admin/realms/master/users/?username=none', undefined],
      ]),
    );
    expect(seen).toHaveLength(4);
  });
});
