import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { canonicalAddressOf } from '../../../src/cli/canonical-address.ts';
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
    expect((await canonicalAddressOf(baseUrl, 'acme', undefined, 2000)).href).toBe(
      'https://gw.example/',
    );
  });

  it('is the address the CLI was given while the gateway cannot say (its Keycloak down)', async () => {
    // A bound token the CLI has cached still serves: the gateway checks it without Keycloak.
    const baseUrl = await gateway({ [METADATA]: KEYCLOAK_DOWN, [DISCOVERY]: KEYCLOAK_DOWN });
    expect((await canonicalAddressOf(baseUrl, 'acme', undefined, 2000)).href).toBe(baseUrl.href);
  });

  it('is not guessed for a gateway that cannot be reached', async () => {
    const baseUrl = new URL(`${await refusingBaseUrl()}/`);
    await expect(canonicalAddressOf(baseUrl, 'acme', undefined, 2000)).rejects.toMatchObject({
      kind: 'unreachable',
    });
  });
});

describe("the gateway's address a login's proofs name", () => {
  // What the answer at REALMGATE_URL names; nothing authenticates it but TLS.
  const naming = (address: string | undefined) => () =>
    Promise.resolve(address === undefined ? undefined : new URL(address));

  it('refuses plain http named through an https REALMGATE_URL: a downgrade', async () => {
    const through = new URL('https://realmgate.internal/');
    await expect(
      canonicalAddressOf(through, 'acme', undefined, 2000, naming('http://gw.example/')),
    ).rejects.toThrow(
      'refused: the answer at https://realmgate.internal/ names http://gw.example/, plain http',
    );
    // https named through plain http (a TLS front the job does not use) is the feature.
    const plain = new URL('http://127.0.0.1:8000/');
    expect(
      (await canonicalAddressOf(plain, 'acme', undefined, 2000, naming('https://gw.example/')))
        .href,
    ).toBe('https://gw.example/');
  });

  it('is the pinned one: another is refused, and it serves while the gateway cannot say', async () => {
    const through = new URL('http://127.0.0.1:8000/');
    const pinned = 'https://gw.example/';
    await expect(
      canonicalAddressOf(through, 'acme', pinned, 2000, naming('https://gw.example/other/')),
    ).rejects.toThrow(
      "refused: the gateway's address is https://gw.example/ (the one this login was made " +
        'with), but the answer at http://127.0.0.1:8000/ names https://gw.example/other/',
    );
    expect((await canonicalAddressOf(through, 'acme', pinned, 2000, naming(undefined))).href).toBe(
      pinned,
    );
    expect((await canonicalAddressOf(through, 'acme', pinned, 2000, naming(pinned))).href).toBe(
      pinned,
    );
  });
});
