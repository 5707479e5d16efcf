import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAdminClient } from '../../../src/keycloak/admin-client.ts';
import { createKeycloakCalls } from '../../../src/keycloak/keycloak-calls.ts';
import { closeServers, listenLocally, refusingBaseUrl } from '../../helpers/local-server.ts';

/** An unsigned token the client library can read its expiry from. */
const base64url = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
const TOKEN = `${base64url({ alg: 'none' })}.${base64url({ exp: 4102444800, iat: 1 })}.x`;

/** A fake Keycloak node: issues TOKEN, answers admin reads with `[]`, records what it got. */
interface FakeNode {
  url: string;
  seen: string[];
  server: Server;
}

async function startFakeNode(): Promise<FakeNode> {
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(req.method === 'POST' ? JSON.stringify({ access_token: TOKEN }) : '[]');
    });
  });
  const url = `${await listenLocally(server)}/auth`;
  return { url, seen, server };
}

const refusingUrl = async () => `${await refusingBaseUrl()}/auth`;

/** The admin-API client over several nodes: each request on the node the layer picked. */
describe('admin-API client: several nodes', () => {
  let a: FakeNode;
  let b: FakeNode;

  beforeAll(async () => {
    a = await startFakeNode();
    b = await startFakeNode();
  });
  afterAll(async () => {
    await closeServers(a.server, b.server);
  });

  it('logs in on another node when the first refuses the connection, then spreads its requests', async () => {
    const calls = createKeycloakCalls({
      keycloakUrl: [await refusingUrl(), a.url, b.url],
      timeoutMs: 1000,
    });
    const client = createAdminClient(calls, 'master');
    await client.auth({ grantType: 'client_credentials', clientId: 'c', clientSecret: 's' });
    expect(a.seen).toEqual(['POST /auth/realms/master/protocol/openid-connect/token']);
    expect(calls.nodes.all.map((node) => node.state)).toEqual(['down', 'up', 'up']);
    a.seen.length = 0;

    // Concurrent requests, each on its own node: none reads another's.
    const answers = await Promise.all(
      Array.from({ length: 4 }, () => client.users.find({ username: 'x' })),
    );
    expect(answers).toEqual([[], [], [], []]);
    expect(a.seen).toHaveLength(2);
    expect(b.seen).toHaveLength(2);
    for (const request of [...a.seen, ...b.seen]) {
      expect(request).toBe('GET /auth/admin/realms/master/users/?username=x');
    }
    calls.nodes.close();
  });
});
