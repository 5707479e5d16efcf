import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StoredLogin } from '../../src/cli/credentials.ts';
import { runCli } from '../../src/cli/main.ts';
import { callApi } from '../helpers/api.ts';
import { capturingIo, piped } from '../helpers/cli-io.ts';
import { claimsOf, createUser, keycloakAdmin, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

// A job rarely calls the gateway by its PUBLIC_URL: an internal service name, 127.0.0.1, another
// listener. Each walk below is the CLI's through such an address, with PUBLIC_URL elsewhere:
// login bound to a key, an API call with DPoP, a refresh grant, a job credential, a script's
// proof. Keycloak (its hostname: PUBLIC_URL/auth) and the gateway's /api check both compare the
// proof's URL with PUBLIC_URL's, which the CLI learns from the gateway.

/** A second listener address: another loopback address and port, PUBLIC_URL the test's. */
const SECOND_LISTENER = { host: '127.0.0.2', port: 19676 };
/** A replica whose PUBLIC_URL names it `localhost`, reached through 127.0.0.1. */
const NAMED_PORT = 19678;

let root: string;
let org: string;
const replicas: Replica[] = [];
const secrets = new Set<string>();

async function realmgate(url: string, argv: string[], configDir: string, stdin = '') {
  const { io, output } = capturingIo(piped(stdin));
  const code = await runCli(argv, { REALMGATE_URL: url, REALMGATE_CONFIG_DIR: configDir }, io);
  const { stdout, stderr } = output;
  for (const secret of secrets) expect(stdout + stderr).not.toContain(secret);
  return { code, stdout, stderr };
}

async function storedLogins(configDir: string): Promise<StoredLogin[]> {
  const text = await readFile(join(configDir, 'credentials.json'), 'utf8');
  const logins = (JSON.parse(text) as { logins: StoredLogin[] }).logins;
  for (const login of logins) secrets.add(login.refreshToken);
  return logins;
}

/**
 * The CLI's walk through `url`, a gateway whose PUBLIC_URL is `publicUrl`: every step bound
 * (DPoP) and answered.
 */
async function walkThrough(url: string, publicUrl: string, user: TestUser) {
  secrets.add(user.password);
  const configDir = await mkdtemp(join(root, 'walk-'));
  const login = await realmgate(
    url,
    ['login', user.realm, user.username, '--password-stdin'],
    configDir,
    `${user.password}\n`,
  );
  expect(login, login.stderr).toMatchObject({ code: 0, stderr: '' });
  const summary = JSON.parse(login.stdout) as Record<string, unknown>;
  expect(summary.dpop_jkt).toEqual(expect.any(String));
  const [stored] = await storedLogins(configDir);
  // Keycloak bound the tokens, and named PUBLIC_URL as their issuer, not `url`.
  const claims = claimsOf(stored!.accessToken);
  expect(claims).toMatchObject({ cnf: { jkt: summary.dpop_jkt } });
  expect(claims.iss).toBe(`${publicUrl}/auth/realms/${user.realm}`);
  // The address its proofs name from now on, kept with it: PUBLIC_URL, not `url`.
  expect(stored!.canonicalUrl).toBe(`${publicUrl}/`);

  // An API call with DPoP (the refresh-token list) through the same address.
  const listed = await realmgate(url, ['tokens', 'list'], configDir);
  expect(listed, listed.stderr).toMatchObject({ code: 0, stderr: '' });
  expect(JSON.parse(listed.stdout)).toEqual([
    expect.objectContaining({ id: stored!.sessionId, dpop_jkt: summary.dpop_jkt }),
  ]);

  // The refresh grant, with a proof, once the cached access token is gone.
  const file = join(configDir, 'credentials.json');
  const withoutAccess = { ...stored!, accessToken: undefined, accessExpiresAt: undefined };
  await writeFile(file, JSON.stringify({ version: 1, logins: [withoutAccess] }), { mode: 0o600 });
  const token = await realmgate(url, ['token'], configDir);
  expect(token, token.stderr).toMatchObject({ code: 0, stderr: '' });
  const access = token.stdout.trim();
  expect(claimsOf(access)).toMatchObject({ cnf: { jkt: summary.dpop_jkt } });

  // A script's call: `proof` for a URL under REALMGATE_URL names it under PUBLIC_URL.
  const path = `/api/${user.realm}/platform/workspaces`;
  const proof = await realmgate(url, ['proof', 'GET', `${url}${path}`], configDir);
  expect(proof, proof.stderr).toMatchObject({ code: 0, stderr: '' });
  expect(claimsOf(proof.stdout.trim())).toMatchObject({ htu: `${publicUrl}${path}` });
  const call = await fetch(`${url}${path}`, {
    headers: { authorization: `DPoP ${access}`, dpop: proof.stdout.trim() },
  });
  expect(call.status, await call.clone().text()).toBe(200);

  // A job credential (the walk of docs/tokens-and-cli.md) through the same address.
  const job = await realmgate(
    url,
    ['login', user.realm, user.username, '--password-stdin', '--name', 'nightly', '--read-only'],
    await mkdtemp(join(root, 'job-')),
    `${user.password}\n`,
  );
  expect(job, job.stderr).toMatchObject({ code: 0, stderr: '' });
  expect(JSON.parse(job.stdout)).toMatchObject({
    name: 'nightly',
    dpop_jkt: expect.any(String) as string,
  });
}

describe('the CLI with DPoP through any address that reaches the gateway', () => {
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'realmgate-cli-addresses-'));
    org = await createOrganization(['ws1']);
  });
  afterAll(async () => {
    for (const replica of replicas) await replica.gateway.close();
    await closeTestDb();
    await rm(root, { recursive: true, force: true });
  });

  it('through a second name (localhost), PUBLIC_URL naming 127.0.0.1', async () => {
    const { publicUrl } = testEnv();
    const url = publicUrl.replace('//127.0.0.1:', '//localhost:');
    expect(url).not.toBe(publicUrl);
    await walkThrough(url, publicUrl, await createUser(org, { workspaceRoles: ['ws1'] }));
  });

  it('through a second listener address (127.0.0.2, another port)', async () => {
    const { host, port } = SECOND_LISTENER;
    replicas.push(await startReplica(port, { HOST: host }));
    const url = `http://${host}:${port}`;
    await walkThrough(url, testEnv().publicUrl, await createUser(org, { workspaceRoles: ['ws1'] }));
  });

  it('through 127.0.0.1, PUBLIC_URL naming localhost', async () => {
    const publicUrl = `http://localhost:${NAMED_PORT}`;
    // The organization's realm names the replica's PUBLIC_URL as its frontend (Keycloak's
    // hostname for that realm), as the test Keycloak's hostname names the test gateway's.
    const named = await createOrganization(['ws1']);
    const admin = await keycloakAdmin();
    await admin.realms.update(
      { realm: named },
      { attributes: { frontendUrl: `${publicUrl}/auth` } },
    );
    replicas.push(await startReplica(NAMED_PORT, { PUBLIC_URL: publicUrl }));
    const url = `http://127.0.0.1:${NAMED_PORT}`;
    await walkThrough(url, publicUrl, await createUser(named, { workspaceRoles: ['ws1'] }));
  });

  it('says which URL the gateway expects and which the proof named, when they differ', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    secrets.add(user.password);
    const configDir = await mkdtemp(join(root, 'mismatch-'));
    const { publicUrl } = testEnv();
    const login = await realmgate(
      publicUrl,
      ['login', user.realm, user.username, '--password-stdin'],
      configDir,
      `${user.password}\n`,
    );
    expect(login, login.stderr).toMatchObject({ code: 0 });
    const path = `/api/${org}/platform/workspaces`;
    const access = (await realmgate(publicUrl, ['token'], configDir)).stdout.trim();
    // A proof for the address the script used, made outside REALMGATE_URL: named as given.
    const elsewhere = `http://gateway.internal:18000${path}`;
    const proof = (await realmgate(publicUrl, ['proof', 'GET', elsewhere], configDir)).stdout;
    const call = await callApi(path, `DPoP ${access}`, { headers: { dpop: proof.trim() } });
    expect(call.status).toBe(401);
    expect(call.body.message).toBe(
      `The DPoP proof is for another URL: this gateway expects ${publicUrl}${path}; ` +
        `the proof names ${elsewhere}.`,
    );
  });
});
