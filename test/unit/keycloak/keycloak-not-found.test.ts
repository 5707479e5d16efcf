import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createAdminClient,
  isHttpStatus,
  isKeycloakNotFound,
} from '../../../src/keycloak/admin-client.ts';
import { createKeycloakCalls } from '../../../src/keycloak/keycloak-calls.ts';
import { closeServers, listenLocally } from '../../helpers/local-server.ts';

const base64url = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
/** An unsigned token the client library can read its expiry from. */
const TOKEN = `${base64url({ alg: 'none' })}.${base64url({ exp: 4102444800, iat: 1 })}.x`;

/**
 * A 404 the admin client failed with, as the real client reads it: Keycloak's own (its JSON
 * `error`, as a session already ended gets) and a proxy's page (Keycloak away behind it).
 */
describe("a 404 of the admin API: Keycloak's own, or a proxy's", () => {
  let server: Server;
  let url: string;
  /** What the fake answers an admin call with: Keycloak's 404, or a proxy's. */
  let notFound: { type: string; body: string };

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.method === 'POST') {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ access_token: TOKEN }));
          return;
        }
        res.statusCode = 404;
        res.setHeader('content-type', notFound.type);
        res.end(notFound.body);
      });
    });
    url = `${await listenLocally(server)}/auth`;
  });
  afterAll(() => closeServers(server));

  async function failureOf(answer: { type: string; body: string }): Promise<unknown> {
    notFound = answer;
    const calls = createKeycloakCalls({ keycloakUrl: [url], timeoutMs: 1000 });
    const client = createAdminClient(calls, 'master');
    await client.auth({ grantType: 'client_credentials', clientId: 'c', clientSecret: 's' });
    try {
      await client.realms.deleteSession({ realm: 'acme', session: 's1', isOffline: true });
      throw new Error('the delete succeeded');
    } catch (err) {
      return err;
    } finally {
      calls.nodes.close();
    }
  }

  it("reads Keycloak's JSON error as not found", async () => {
    const err = await failureOf({
      type: 'application/json',
      body: JSON.stringify({ error: 'Sesssion not found' }),
    });
    expect(isHttpStatus(err, 404)).toBe(true);
    expect(isKeycloakNotFound(err)).toBe(true);
  });

  it("never reads a proxy's page as not found: it says nothing of what Keycloak holds", async () => {
    for (const answer of [
      { type: 'text/html', body: '<html><body>404 Not Found</body></html>' },
      { type: 'application/json', body: '{"message":"no route"}' },
      { type: 'text/plain', body: '' },
    ]) {
      const err = await failureOf(answer);
      expect(isHttpStatus(err, 404), answer.body).toBe(true);
      expect(isKeycloakNotFound(err), answer.body).toBe(false);
    }
  });
});
