import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { gatewayAddressOf } from '../../../src/cli/gateway-address.ts';
import { closeServers, listenLocally, refusingBaseUrl } from '../../helpers/local-server.ts';

const servers: Server[] = [];
afterEach(async () => {
  await closeServers(...servers.splice(0));
});

/** A gateway that answers each path with `answers[path]` (status, JSON body), else 404. */
async function gateway(answers: Record<string, [number, unknown]>): Promise<URL> {
  const server = createServer((req, res) => {
    const [status, body] = answers[req.url ?? ''] ?? [404, { message: 'Not found.' }];
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  servers.push(server);
  return new URL(`${await listenLocally(server)}/`);
}

const METADATA = '/.well-known/oauth-protected-resource/api/acme';
const DISCOVERY = '/auth/realms/acme/.well-known/openid-configuration';
/** The envelope of a gateway whose Keycloak does not answer. */
const KEYCLOAK_DOWN: [number, unknown] = [
  503,
  { code: '503-11001', message: 'The identity provider is unavailable; retry later.' },
];

describe("the gateway's own address, as the CLI learns it", () => {
  it('is the resource of the protected-resource metadata, without its api/<org>', async () => {
    const baseUrl = await gateway({
      [METADATA]: [200, { resource: 'https://gw.example/api/acme' }],
    });
    expect((await gatewayAddressOf(baseUrl, 'acme', 2000)).href).toBe('https://gw.example/');
  });

  it('is the address the CLI was given while the gateway cannot say (its Keycloak down)', async () => {
    // A bound token the CLI has cached still serves: the gateway checks it without Keycloak.
    const baseUrl = await gateway({ [METADATA]: KEYCLOAK_DOWN, [DISCOVERY]: KEYCLOAK_DOWN });
    expect((await gatewayAddressOf(baseUrl, 'acme', 2000)).href).toBe(baseUrl.href);
  });

  it('is not guessed for a gateway that cannot be reached', async () => {
    const baseUrl = new URL(`${await refusingBaseUrl()}/`);
    await expect(gatewayAddressOf(baseUrl, 'acme', 2000)).rejects.toMatchObject({
      kind: 'unreachable',
    });
  });
});
