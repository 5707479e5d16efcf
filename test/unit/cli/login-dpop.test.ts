import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EmbeddedJWK, jwtVerify } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { StoredLogin } from '../../../src/cli/credentials.ts';
import { thumbprintOf } from '../../../src/cli/dpop.ts';
import { runCli } from '../../../src/cli/main.ts';
import { capturingIo, piped } from '../../helpers/cli-io.ts';
import { closeServers, listenLocally } from '../../helpers/local-server.ts';

/** A stand-in gateway whose realm offers DPoP; `answer` decides each token request's answer. */
let server: Server;
let baseUrl: string;
let configDir: string;
let proofs: Array<string | undefined>;
let answer: (req: IncomingMessage, res: ServerResponse) => void;
/** The `resource` of the stand-in's protected-resource metadata; undefined: it has none (404). */
let metadataResource: string | undefined;

function jwt(claims: Record<string, unknown>): string {
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part({ alg: 'none' })}.${part(claims)}.c2ln`;
}

function tokens(res: ServerResponse, tokenType: string) {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(
    JSON.stringify({
      access_token: jwt({ sid: 'session-1', preferred_username: 'alice' }),
      expires_in: 300,
      refresh_token: 'refresh-token-secret',
      token_type: tokenType,
    }),
  );
}

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/.well-known/oauth-protected-resource/api/acme') {
      res.writeHead(metadataResource ? 200 : 404, { 'content-type': 'application/json' });
      res.end(JSON.stringify(metadataResource ? { resource: metadataResource } : { data: null }));
      return;
    }
    if (req.method === 'GET' && req.url!.endsWith('/.well-known/openid-configuration')) {
      const issuer = 'http://gateway.example/auth/realms/acme';
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          issuer,
          token_endpoint: `${issuer}/protocol/openid-connect/token`,
          dpop_signing_alg_values_supported: ['ES256', 'RS256'],
        }),
      );
      return;
    }
    req.resume().on('end', () => {
      proofs.push(req.headers.dpop as string | undefined);
      answer(req, res);
    });
  });
  baseUrl = await listenLocally(server);
});
afterAll(async () => {
  await closeServers(server);
});
beforeEach(async () => {
  proofs = [];
  metadataResource = undefined;
  configDir = await mkdtemp(join(tmpdir(), 'realmgate-login-dpop-'));
  return () => rm(configDir, { recursive: true, force: true });
});

async function login(...options: string[]) {
  const { io, output } = capturingIo(piped('the-password\n'));
  const env = { REALMGATE_URL: baseUrl, REALMGATE_CONFIG_DIR: configDir };
  const status = await runCli(['login', 'acme', 'alice', '--password-stdin', ...options], env, io);
  return { status, ...output };
}

async function stored(): Promise<StoredLogin> {
  const file = JSON.parse(await readFile(join(configDir, 'credentials.json'), 'utf8')) as {
    logins: StoredLogin[];
  };
  return file.logins[0]!;
}

const claimsOf = async (proof: string | undefined) =>
  (await jwtVerify(proof!, EmbeddedJWK, { typ: 'dpop+jwt' })).payload;

describe('realmgate login where the realm offers DPoP', () => {
  it('sends the nonce Keycloak asks for in a second proof, and keeps the key it bound to', async () => {
    answer = (req, res) => {
      if (proofs.length === 1) {
        res.writeHead(400, { 'content-type': 'application/json', 'dpop-nonce': 'n-1' });
        res.end(
          '{"error":"use_dpop_nonce","error_description":"Authorization server requires nonce in DPoP proof"}',
        );
        return;
      }
      tokens(res, 'DPoP');
    };
    const { status, stdout, stderr } = await login();
    expect({ status, stderr }).toEqual({ status: 0, stderr: '' });
    expect(proofs).toHaveLength(2);
    const [first, second] = [await claimsOf(proofs[0]), await claimsOf(proofs[1])];
    // The token endpoint as the discovery document names it (the gateway's PUBLIC_URL), not
    // the address the request went to: Keycloak compares `htu` with its own.
    expect(first).toMatchObject({
      htm: 'POST',
      htu: 'http://gateway.example/auth/realms/acme/protocol/openid-connect/token',
    });
    expect(first).not.toHaveProperty('nonce');
    expect(second).toMatchObject({ htm: 'POST', nonce: 'n-1' });
    expect(second.jti).not.toBe(first.jti);
    const { dpopKey } = await stored();
    expect(dpopKey).toBeDefined();
    expect(JSON.parse(stdout)).toMatchObject({ dpop_jkt: await thumbprintOf(dpopKey!) });
    expect(stdout).not.toContain(dpopKey!.d);
  });

  it('keeps no key when the answer is bearer tokens, and sends no proof with --no-dpop', async () => {
    answer = (_, res) => tokens(res, 'Bearer');
    const bearer = await login();
    expect(bearer).toMatchObject({ status: 0 });
    expect(bearer.stderr).toBe(
      'realmgate: the realm answered bearer tokens to a proof; kept as such\n',
    );
    expect(proofs[0]).toEqual(expect.any(String));
    expect(await stored()).not.toHaveProperty('dpopKey');
    expect(JSON.parse(bearer.stdout)).toMatchObject({ dpop_jkt: null });

    proofs = [];
    expect(await login('--no-dpop')).toMatchObject({ status: 0, stderr: '' });
    expect(proofs).toEqual([undefined]);
  });

  it('says which URL the proof named and where it went when Keycloak refuses it; no OTP hint', async () => {
    answer = (_, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end('{"error":"invalid_dpop_proof","error_description":"DPoP HTTP URL mismatch"}');
    };
    const refused = await login();
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain(
      'login refused: DPoP HTTP URL mismatch; the proof named ' +
        'http://gateway.example/auth/realms/acme/protocol/openid-connect/token',
    );
    expect(refused.stderr).toContain(`sent through ${baseUrl}/`);
    expect(refused.stderr).not.toContain('one-time password');

    // A wrong password (or a missing one-time password) keeps its hint.
    answer = (_, res) => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end('{"error":"invalid_grant","error_description":"Invalid user credentials"}');
    };
    const wrong = await login();
    expect(wrong.status).toBe(1);
    expect(wrong.stderr).toContain(
      'login refused: Invalid user credentials; for an account with two-factor authentication',
    );
  });

  it("names the gateway's own address in an API call's proof: its resource metadata, else the issuer", async () => {
    answer = (_, res) => tokens(res, 'DPoP');
    // Each address is learnt once per process: the stand-in by two names, with and without metadata.
    const proofThrough = async (url: string) => {
      const env = { REALMGATE_URL: url, REALMGATE_CONFIG_DIR: configDir };
      const loggedIn = capturingIo(piped('the-password\n'));
      expect(await runCli(['login', 'acme', 'alice', '--password-stdin'], env, loggedIn.io)).toBe(
        0,
      );
      const { io, output } = capturingIo();
      expect(await runCli(['proof', 'GET', `${url}/api/acme/x?q=1`], env, io)).toBe(0);
      return (await claimsOf(output.stdout.trim())).htu;
    };
    expect(await proofThrough(baseUrl)).toBe('http://gateway.example/api/acme/x');
    metadataResource = 'https://public.example/base/api/acme';
    const secondName = baseUrl.replace('127.0.0.1', 'localhost');
    expect(await proofThrough(secondName)).toBe('https://public.example/base/api/acme/x');
  });
});
