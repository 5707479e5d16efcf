import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { importJWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoredLogin } from '../../src/cli/credentials.ts';
import { runCli } from '../../src/cli/main.ts';
import { capturingIo, piped } from '../helpers/cli-io.ts';
import { dpopProof } from '../helpers/dpop.ts';
import { createUser, keycloakAdmin } from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/** A replica whose Keycloak is behind a front the test cuts; its PUBLIC_URL is its own. */
const PORT = 21110;
const PUBLIC_URL = `http://127.0.0.1:${PORT}`;
const BIN = join(import.meta.dirname, '../../src/cli/bin.ts');

let root: string;
let front: KeycloakFront;
let replica: Replica;
let org: string;
const secrets = new Set<string>();

async function realmgate(argv: string[], configDir: string, stdin = '') {
  const { io, output } = capturingIo(piped(stdin));
  const code = await runCli(
    argv,
    { REALMGATE_URL: PUBLIC_URL, REALMGATE_CONFIG_DIR: configDir },
    io,
  );
  const { stdout, stderr } = output;
  for (const secret of secrets) expect(stdout + stderr).not.toContain(secret);
  return { code, stdout, stderr };
}

/** The CLI as a process of its own (`src/cli/bin.ts`), as a job's step runs it. */
async function cliProcess(argv: string[], configDir: string) {
  const env = { ...process.env, REALMGATE_URL: PUBLIC_URL, REALMGATE_CONFIG_DIR: configDir };
  const { stdout, stderr, code } = await promisify(execFile)('node', [BIN, ...argv], { env }).then(
    (done) => ({ ...done, code: 0 }),
    (failed: { stdout: string; stderr: string; code: number }) => failed,
  );
  for (const secret of secrets) expect(stdout + stderr).not.toContain(secret);
  return { code, stdout, stderr };
}

describe('a bound login through a Keycloak outage (the CLI, against the real Keycloak)', () => {
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'realmgate-dpop-outage-'));
    front = await startKeycloakFront(testEnv().keycloakUrl);
    // The organization's realm names the replica's PUBLIC_URL as its frontend (Keycloak's
    // hostname for that realm), as the test Keycloak's hostname names the test gateway's.
    org = await createOrganization(['ws1']);
    const admin = await keycloakAdmin();
    await admin.realms.update(
      { realm: org },
      { attributes: { frontendUrl: `${PUBLIC_URL}/auth` } },
    );
    replica = await startReplica(PORT, { PUBLIC_URL, KEYCLOAK_URL: front.url });
  });
  afterAll(async () => {
    await front?.set('forward');
    await replica?.gateway.close();
    await front?.close();
    await closeTestDb();
    await rm(root, { recursive: true, force: true });
  });

  it('still proves its cached token while the gateway cannot say its own address', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    secrets.add(user.password);
    const configDir = join(root, 'job');
    const login = await realmgate(
      ['login', org, user.username, '--password-stdin'],
      configDir,
      `${user.password}\n`,
    );
    expect(login, login.stderr).toMatchObject({ code: 0, stderr: '' });
    const file = JSON.parse(await readFile(join(configDir, 'credentials.json'), 'utf8')) as {
      logins: StoredLogin[];
    };
    const stored = file.logins[0]!;
    secrets.add(stored.refreshToken);
    const { kty, crv, x, y } = stored.dpopKey!;
    const key = {
      alg: 'ES256',
      privateKey: await importJWK({ ...stored.dpopKey!, alg: 'ES256' }, 'ES256'),
      publicJwk: { kty, crv, x, y },
      thumbprint: '',
    };
    const path = `/api/${org}/platform/workspaces`;
    const call = (token: string, proof: string) =>
      fetch(`${PUBLIC_URL}${path}`, { headers: { authorization: `DPoP ${token}`, dpop: proof } });
    const token = stored.accessToken!;
    // While Keycloak answers: the replica knows the realm's keys from this call.
    const before = await call(
      token,
      await dpopProof(key, { method: 'GET', url: `${PUBLIC_URL}${path}`, accessToken: token }),
    );
    expect(before.status, await before.text()).toBe(200);

    // Keycloak unreachable: the metadata cannot read the realm's DPoP switch (503), the
    // discovery document is Keycloak's; the cached token is still good for the API.
    await front.set('closed');
    const metadata = await fetch(`${PUBLIC_URL}/.well-known/oauth-protected-resource/api/${org}`);
    expect(metadata.status).toBe(503);
    await metadata.body?.cancel();
    const cached = await realmgate(['token'], configDir);
    expect(cached, cached.stderr).toMatchObject({ code: 0, stdout: `${token}\n` });
    // A new process, as each step of a job is: it has learnt nothing of the realm yet.
    const proof = await cliProcess(['proof', 'GET', `${PUBLIC_URL}${path}`], configDir);
    expect(proof, proof.stderr).toMatchObject({ code: 0, stderr: '' });
    const during = await call(token, proof.stdout.trim());
    expect(during.status, await during.text()).toBe(200);
  });

  it('a login or a refresh while Keycloak is down exits 5, the status automation retries', async () => {
    await front.set('forward');
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    secrets.add(user.password);
    const configDir = join(root, 'retrying-job');
    const login = await realmgate(
      ['login', org, user.username, '--password-stdin'],
      configDir,
      `${user.password}\n`,
    );
    expect(login, login.stderr).toMatchObject({ code: 0, stderr: '' });
    const path = join(configDir, 'credentials.json');
    const file = JSON.parse(await readFile(path, 'utf8')) as { logins: StoredLogin[] };
    for (const stored of file.logins) {
      secrets.add(stored.refreshToken);
      if (stored.dpopKey) secrets.add(stored.dpopKey.d);
    }
    // The cached access token has run out: `token` needs a refresh grant.
    const past = new Date(Date.now() - 1000).toISOString();
    const logins = file.logins.map((stored) => ({ ...stored, accessExpiresAt: past }));
    await writeFile(path, JSON.stringify({ version: 1, logins }), { mode: 0o600 });

    await front.set('closed');
    const down = 'error 503 503-11001: The identity provider is unavailable; retry later.\n';
    const refresh = await realmgate(['token'], configDir);
    expect(refresh).toEqual({ code: 5, stdout: '', stderr: down });
    const again = await realmgate(
      ['login', org, user.username, '--password-stdin'],
      join(root, 'another-job'),
      `${user.password}\n`,
    );
    expect(again).toEqual({ code: 5, stdout: '', stderr: down });

    // Retried once Keycloak is back, the same command works.
    await front.set('forward');
    const retried = await realmgate(['token'], configDir);
    expect(retried, retried.stderr).toMatchObject({ code: 0, stderr: '' });
  });
});
