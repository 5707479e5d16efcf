import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { StoredLogin } from '../../src/cli/credentials.ts';
import { capturingIo, piped } from '../helpers/cli-io.ts';
import { createUser } from '../helpers/keycloak.ts';
import { closeServers } from '../helpers/local-server.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startTcpFront, type TcpFront } from '../helpers/tcp-front.ts';
import { testEnv } from '../helpers/test-env.ts';

// A job's REALMGATE_URL is a plain-http address another server can take: a port on a shared
// runner, free while the gateway is down. What the CLI learnt at login (the gateway's
// PUBLIC_URL, which its proofs name) must not be relearnt from that server.

/** The address the job uses: a relay to the test gateway, then the other server's port. */
const JOB_PORT = 19684;

let root: string;
let front: TcpFront;
let impostor: Server | undefined;

/** `realmgate <argv>` as a new process would run it: nothing learnt before. */
async function realmgate(argv: string[], configDir: string, stdin = '') {
  vi.resetModules();
  const { runCli } = await import('../../src/cli/main.ts');
  const { io, output } = capturingIo(piped(stdin));
  const env = { REALMGATE_URL: `http://127.0.0.1:${JOB_PORT}`, REALMGATE_CONFIG_DIR: configDir };
  const code = await runCli(argv, env, io);
  return { code, ...output };
}

/** A server at the job's address that names another gateway's address, keeping what it is sent. */
async function startImpostor(realm: string): Promise<string[]> {
  const received: string[] = [];
  const named = 'https://gw.example';
  impostor = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      received.push(`${req.method} ${req.url} ${req.headers.authorization ?? ''} ${body}`);
      const issuer = `${named}/auth/realms/${realm}`;
      const answer = req.url!.startsWith('/.well-known/oauth-protected-resource/')
        ? { resource: `${named}/api/${realm}` }
        : {
            issuer,
            token_endpoint: `${issuer}/protocol/openid-connect/token`,
            dpop_signing_alg_values_supported: ['ES256'],
          };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  });
  await new Promise<void>((resolve) => impostor!.listen(JOB_PORT, '127.0.0.1', resolve));
  return received;
}

describe("a login's gateway address, kept from the login on", () => {
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'realmgate-cli-pinning-'));
    const { port } = new URL(testEnv().publicUrl);
    front = await startTcpFront(JOB_PORT, { host: '127.0.0.1', port: Number(port) });
  });
  afterAll(async () => {
    if (impostor) await closeServers(impostor);
    await front.cut();
    await closeTestDb();
    await rm(root, { recursive: true, force: true });
  });

  it('sends nothing to a server that took the address and names another gateway', async () => {
    const org = await createOrganization(['ws1']);
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const configDir = await mkdtemp(join(root, 'job-'));
    const login = await realmgate(
      ['login', user.realm, user.username, '--password-stdin'],
      configDir,
      `${user.password}\n`,
    );
    expect(login, login.stderr).toMatchObject({ code: 0, stderr: '' });
    const file = join(configDir, 'credentials.json');
    const [stored] = (JSON.parse(await readFile(file, 'utf8')) as { logins: StoredLogin[] }).logins;
    const publicUrl = `${testEnv().publicUrl}/`;
    expect(stored!.canonicalUrl).toBe(publicUrl);

    // The gateway gone from that port; another server answers there.
    await front.cut();
    const received = await startImpostor(user.realm);
    const listed = await realmgate(['tokens', 'list'], configDir);
    expect(listed.code).toBe(1);
    expect(listed.stderr).toContain(
      `the gateway's address is ${publicUrl} (the one this login was made with), but the ` +
        `answer at http://127.0.0.1:${JOB_PORT}/ names https://gw.example/`,
    );
    // Its refresh, once the cached access token is gone: the refresh token stays here too.
    const withoutAccess = { ...stored!, accessToken: undefined, accessExpiresAt: undefined };
    await writeFile(file, JSON.stringify({ version: 1, logins: [withoutAccess] }), {
      mode: 0o600,
    });
    const token = await realmgate(['token'], configDir);
    expect(token.code).toBe(1);
    expect(received.join('\n')).not.toContain(stored!.accessToken!);
    expect(received.join('\n')).not.toContain(stored!.refreshToken);
    expect(received.every((line) => line.startsWith('GET '))).toBe(true);

    // The gateway back at its port: the login works on.
    await closeServers(impostor!);
    impostor = undefined;
    await front.restore();
    const again = await realmgate(['tokens', 'list'], configDir);
    expect(again, again.stderr).toMatchObject({ code: 0, stderr: '' });
  });
});
