import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedJWK, jwtVerify } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { StoredLogin } from '../../../src/cli/credentials.ts';
import { capturingIo, piped } from '../../helpers/cli-io.ts';
import { closeServers, listenLocally } from '../../helpers/local-server.ts';

// A stand-in gateway whose answers a test changes between two runs of the CLI, as another
// server taking its address (the gateway down, its port taken) would. Each run is a fresh
// import of the CLI: a new process, which learns the gateway's address anew.

/** The `resource` of the realm's protected-resource metadata. */
let resource: string;
/** The base of the realm's issuer and token endpoint in its discovery document. */
let issuerBase: string;
/** What reached the token endpoint and the API: refresh tokens and proofs are sent there. */
let received: Array<{ url: string; body: string; dpop?: string }>;
let server: Server;
let baseUrl: string;
let configDir: string;

function jwt(claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'none' })}.${part(claims)}.c2ln`;
}

function json(res: import('node:http').ServerResponse, body: unknown): void {
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const url = req.url!;
    if (url === '/.well-known/oauth-protected-resource/api/acme') return json(res, { resource });
    if (url.endsWith('/.well-known/openid-configuration')) {
      const issuer = `${issuerBase}auth/realms/acme`;
      return json(res, {
        issuer,
        token_endpoint: `${issuer}/protocol/openid-connect/token`,
        dpop_signing_alg_values_supported: ['ES256'],
      });
    }
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      received.push({ url, body, dpop: req.headers.dpop as string | undefined });
      if (url.startsWith('/api/'))
        return json(res, { result: '000-00000', message: 'ok', data: [] });
      // Less than the CLI's minute of margin: each command refreshes.
      json(res, {
        access_token: jwt({ sid: 'session-1', preferred_username: 'alice' }),
        expires_in: 30,
        refresh_token: 'refresh-token-secret',
        token_type: 'DPoP',
      });
    });
  });
  baseUrl = `${await listenLocally(server)}/`;
});
afterAll(async () => {
  await closeServers(server);
});
beforeEach(async () => {
  resource = 'http://gateway.example/api/acme';
  issuerBase = 'http://gateway.example/';
  received = [];
  configDir = await mkdtemp(join(tmpdir(), 'realmgate-pinning-'));
  return () => rm(configDir, { recursive: true, force: true });
});

/** `realmgate <args>` in a new process (a fresh import: nothing learnt before). */
async function run(args: string[], extraEnv: Record<string, string> = {}) {
  vi.resetModules();
  const { runCli } = await import('../../../src/cli/main.ts');
  const { io, output } = capturingIo(piped('the-password\n'));
  const env = { REALMGATE_URL: baseUrl, REALMGATE_CONFIG_DIR: configDir, ...extraEnv };
  const status = await runCli(args, env, io);
  return { status, ...output };
}

const login = (extraEnv?: Record<string, string>) =>
  run(['login', 'acme', 'alice', '--password-stdin'], extraEnv);

async function stored(): Promise<StoredLogin> {
  const file = JSON.parse(await readFile(join(configDir, 'credentials.json'), 'utf8')) as {
    logins: StoredLogin[];
  };
  return file.logins[0]!;
}

const htuOf = async (proof: string | undefined) =>
  (await jwtVerify(proof!, EmbeddedJWK, { typ: 'dpop+jwt' })).payload.htu;

describe("the gateway's address a login's proofs name, pinned at login", () => {
  it('is recorded at login, and another one named later is refused, naming both, before anything is sent', async () => {
    expect(await login()).toMatchObject({ status: 0, stderr: '' });
    expect((await stored()).canonicalUrl).toBe('http://gateway.example/');

    // Another server now answers at REALMGATE_URL, naming another gateway's address.
    resource = 'https://gw.example/api/acme';
    issuerBase = 'https://gw.example/';
    received = [];
    const expected =
      'http://gateway.example/ (the one this login was made with), but the answer at ' +
      `${baseUrl} names https://gw.example/`;
    const refresh = await run(['token']);
    expect(refresh.status).toBe(1);
    expect(refresh.stderr).toContain(expected);
    const list = await run(['tokens', 'list']);
    expect(list.status).toBe(1);
    const proof = await run(['proof', 'GET', `${baseUrl}api/acme/x`]);
    expect(proof).toMatchObject({ status: 1, stdout: '' });
    expect(proof.stderr).toContain(expected);
    // No refresh token, access token or proof went to it.
    expect(received).toEqual([]);

    // The gateway back: its answers name the recorded address again.
    resource = 'http://gateway.example/api/acme';
    issuerBase = 'http://gateway.example/';
    expect(await run(['tokens', 'list'])).toMatchObject({ status: 0 });
    expect(await Promise.all(received.map((r) => htuOf(r.dpop)))).toEqual([
      'http://gateway.example/auth/realms/acme/protocol/openid-connect/token',
      'http://gateway.example/api/acme/platform/users/_current/refresh_tokens',
    ]);
  });

  it('is REALMGATE_CANONICAL_URL when set: nothing learnt at login, another address refused later', async () => {
    // The gateway's answer at login is not trusted: the operator names the address.
    resource = 'https://spoofed.example/api/acme';
    expect(await login({ REALMGATE_CANONICAL_URL: 'http://gateway.example' })).toMatchObject({
      status: 0,
      stderr: '',
    });
    expect((await stored()).canonicalUrl).toBe('http://gateway.example/');
    expect(await htuOf(received[0]!.dpop)).toBe(
      'http://gateway.example/auth/realms/acme/protocol/openid-connect/token',
    );

    const other = await run(['token'], { REALMGATE_CANONICAL_URL: 'https://other.example/' });
    expect(other.status).toBe(2);
    expect(other.stderr).toContain(
      'REALMGATE_CANONICAL_URL names https://other.example/, but the stored login of alice ' +
        '(realm acme) was made with http://gateway.example/',
    );
  });
});
