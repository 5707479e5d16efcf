import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { thumbprintOf, type DpopKey } from '../../src/cli/dpop.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import {
  claimsOf,
  createUser,
  passwordGrantBody,
  postToken,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';
import { cliOfTestGateway } from '../helpers/cli-run.ts';

/** The proof maker docs/tokens-and-cli.md shows, run as a reader would run it. */
const PROOF_SCRIPT = join(import.meta.dirname, '../../docs/examples/dpop-proof.mjs');

let root: string;
/** Every secret seen so far; no CLI output may contain one. */
const secrets = new Set<string>();

const { realmgate, storedLogins } = cliOfTestGateway(secrets);

/** A proof by the documented script, with the key in `keyFile` (made there when absent). */
async function scriptProof(keyFile: string, method: string, url: string, accessToken?: string) {
  const { stdout } = await promisify(execFile)('node', [PROOF_SCRIPT, keyFile, method, url], {
    env: { ...process.env, ...(accessToken && { ACCESS_TOKEN: accessToken }) },
  });
  return stdout.trim();
}

const tokenUrl = (realm: string) =>
  `${testEnv().publicUrl}/auth/realms/${realm}/protocol/openid-connect/token`;

/** The refresh grant through the gateway's /auth, with the proof given (if any). */
function refreshGrant(realm: string, refreshToken: string, proof?: string) {
  const body = new URLSearchParams({
    client_id: apiClientIdOf(realm),
    grant_type: 'refresh_token',
    refresh_token: refreshToken,
  });
  return postToken(`${testEnv().publicUrl}/auth`, realm, body.toString(), {
    ...(proof && { dpop: proof }),
  });
}

async function login(user: TestUser, configDir: string, ...options: string[]) {
  secrets.add(user.password);
  const answer = await realmgate(
    ['login', user.realm, user.username, '--password-stdin', ...options],
    configDir,
    `${user.password}\n`,
  );
  expect(answer, answer.stderr).toMatchObject({ code: 0, stderr: '' });
  return JSON.parse(answer.stdout) as Record<string, unknown>;
}

describe('the CLI binds what it holds (DPoP) against the real Keycloak, through /auth', () => {
  let org: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'realmgate-cli-dpop-'));
    org = await createOrganization(['ws1']);
  });
  afterAll(async () => {
    await closeTestDb();
    await rm(root, { recursive: true, force: true });
  });

  it('binds the login to a key of its own, kept 0600 beside the refresh token', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const configDir = join(root, 'bound');
    const summary = await login(user, configDir);
    const [stored] = await storedLogins(configDir);
    expect(stored!.dpopKey).toMatchObject({ kty: 'EC', crv: 'P-256' });
    expect((await stat(join(configDir, 'credentials.json'))).mode & 0o777).toBe(0o600);
    const jkt = await thumbprintOf(stored!.dpopKey!);
    expect(summary.dpop_jkt).toBe(jkt);
    // Keycloak bound the tokens to that key.
    expect(claimsOf(stored!.accessToken)).toMatchObject({ cnf: { jkt } });
    expect(claimsOf(stored!.refreshToken)).toMatchObject({ cnf: { jkt } });

    // The CLI's own refresh grant carries a proof of the key: a new token, bound the same way.
    const file = join(configDir, 'credentials.json');
    const withoutAccess = { ...stored!, accessToken: undefined, accessExpiresAt: undefined };
    await writeFile(file, JSON.stringify({ version: 1, logins: [withoutAccess] }), { mode: 0o600 });
    const token = await realmgate(['token'], configDir);
    expect(token).toMatchObject({ code: 0, stderr: '' });
    expect(claimsOf(token.stdout.trim())).toMatchObject({ cnf: { jkt }, sid: stored!.sessionId });

    // The CLI's own API calls carry a proof (Authorization: DPoP).
    const listed = await realmgate(['tokens', 'list'], configDir);
    expect(listed, listed.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ id: stored!.sessionId, dpop_jkt: jkt }),
    ]);
    // A script's call with a bound login: `token` and `proof`, as the help shows.
    const path = `/api/${org}/platform/workspaces`;
    const access = (await realmgate(['token'], configDir)).stdout.trim();
    const proof = await realmgate(['proof', 'GET', `${testEnv().publicUrl}${path}`], configDir);
    expect(proof).toMatchObject({ code: 0, stderr: '' });
    const call = await callApi(path, `DPoP ${access}`, { headers: { dpop: proof.stdout.trim() } });
    expect(call.status, JSON.stringify(call.body)).toBe(200);
  });

  it('a refresh token copied without its key is refused by Keycloak; with the key it works', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const configDir = join(root, 'copied');
    await login(user, configDir);
    const [stored] = await storedLogins(configDir);
    const copied = stored!.refreshToken;
    const url = tokenUrl(org);

    const withoutProof = await refreshGrant(org, copied);
    expect(withoutProof.status).toBe(400);
    expect(withoutProof.json).not.toHaveProperty('access_token');

    const otherKey = join(root, 'other-key.json');
    const otherProof = await scriptProof(otherKey, 'POST', url);
    const withOtherKey = await refreshGrant(org, copied, otherProof);
    expect(withOtherKey.status).toBe(400);
    expect(withOtherKey.json).not.toHaveProperty('access_token');

    // The login's own key, in a file the documented script reads: the grant goes through.
    const ownKey = join(root, 'own-key.json');
    await writeFile(ownKey, JSON.stringify(stored!.dpopKey), { mode: 0o600 });
    const withKey = await refreshGrant(org, copied, await scriptProof(ownKey, 'POST', url));
    expect(withKey.status, JSON.stringify(withKey.json)).toBe(200);
    expect(withKey.json.token_type).toBe('DPoP');
    const jkt = await thumbprintOf(stored!.dpopKey!);
    expect(claimsOf(withKey.json.access_token)).toMatchObject({ cnf: { jkt } });
  });

  it('--key-file keeps the key on the host: a copy of the credentials without it is useless', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const configDir = join(root, 'apart');
    const host = join(root, 'host');
    await mkdir(host, { recursive: true });
    const keyFile = join(host, 'nightly.key');
    const summary = await login(user, configDir, '--name', 'nightly', '--key-file', keyFile);
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    const key = JSON.parse(await readFile(keyFile, 'utf8')) as DpopKey;
    secrets.add(key.d);
    const jkt = await thumbprintOf(key);
    expect(summary).toMatchObject({ dpop_jkt: jkt, key_file: keyFile });
    // The credentials file names the key file and the thumbprint, never the key.
    const credentials = await readFile(join(configDir, 'credentials.json'), 'utf8');
    expect(credentials).not.toContain(key.d);
    const [stored] = await storedLogins(configDir);
    expect(stored).toMatchObject({ keyFile, keyThumbprint: jkt });
    expect(stored).not.toHaveProperty('dpopKey');
    expect(claimsOf(stored!.refreshToken)).toMatchObject({ cnf: { jkt } });

    // On the host: the refresh grant and the API calls prove the key in the file.
    const file = join(configDir, 'credentials.json');
    const withoutAccess = { ...stored!, accessToken: undefined, accessExpiresAt: undefined };
    await writeFile(file, JSON.stringify({ version: 1, logins: [withoutAccess] }), { mode: 0o600 });
    const listed = await realmgate(['tokens', 'list'], configDir);
    expect(listed, listed.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ id: stored!.sessionId, dpop_jkt: jkt, key_file: keyFile }),
    ]);

    // The credentials copied elsewhere (a CI secret), without the key file: useless.
    const copied = join(root, 'copied-apart');
    await mkdir(copied, { recursive: true });
    await writeFile(join(copied, 'credentials.json'), await readFile(file), { mode: 0o600 });
    const elsewhere = { REALMGATE_KEY_FILE: join(root, 'not-on-this-host.key') };
    const refused = await realmgate(['tokens', 'list'], copied, '', elsewhere);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('does not exist: a login that keeps its key apart works only');
    const [copiedLogin] = await storedLogins(copied);
    // Keycloak refuses the refresh token without a proof, and with a proof of another key.
    expect((await refreshGrant(org, copiedLogin!.refreshToken)).status).toBe(400);
    const otherProof = await scriptProof(join(root, 'thief.key'), 'POST', tokenUrl(org));
    expect((await refreshGrant(org, copiedLogin!.refreshToken, otherProof)).status).toBe(400);
    // The gateway refuses its access token as Bearer, and with the DPoP scheme but no proof.
    const access = copiedLogin!.accessToken!;
    const path = `/api/${org}/platform/workspaces`;
    expect((await callApi(path, `Bearer ${access}`)).status).toBe(401);
    expect((await callApi(path, `DPoP ${access}`)).status).toBe(401);
    // With the key file where the job runs (REALMGATE_KEY_FILE), the same copy works.
    const onHost = await realmgate(['tokens', 'list'], copied, '', { REALMGATE_KEY_FILE: keyFile });
    expect(onHost, onHost.stderr).toMatchObject({ code: 0, stderr: '' });
  });

  it('--no-dpop keeps bearer tokens, and so does a login made before the CLI bound them', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const configDir = join(root, 'bearer');
    const summary = await login(user, configDir, '--no-dpop');
    expect(summary.dpop_jkt).toBeNull();
    const [stored] = await storedLogins(configDir);
    expect(stored).not.toHaveProperty('dpopKey');
    expect(claimsOf(stored!.accessToken)).not.toHaveProperty('cnf');
    expect((await refreshGrant(org, stored!.refreshToken)).status).toBe(200);
  });

  it("the refresh-token list shows each token's key thumbprint; null for a bearer token", async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const bound = await login(user, join(root, 'list-bound'));
    const bearer = await login(user, join(root, 'list-bearer'), '--no-dpop');
    const byId = await refreshTokensOf(user);
    expect(byId.get(bound.session_id)).toMatchObject({ dpop_jkt: bound.dpop_jkt, name: null });
    expect(byId.get(bearer.session_id)).toMatchObject({ dpop_jkt: null });
  });

  it('binds a job credential the same way, listed with its name, reach and key', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const job = await login(user, join(root, 'list-job'), '--name', 'nightly', '--read-only');
    expect(job).toMatchObject({ name: 'nightly', dpop_jkt: expect.any(String) as string });
    expect((await refreshTokensOf(user)).get(job.session_id)).toMatchObject({
      dpop_jkt: job.dpop_jkt,
      name: 'nightly',
      read_only: true,
    });
  });

  it("a read-only login over the user's stored login revokes the one it replaces with that one's own token", async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const configDir = join(root, 'replaced-by-read-only');
    const full = await login(user, configDir);
    // The job's read-only login may not revoke another session (a DELETE is a write): the
    // session it replaces revokes itself, with its own token and key.
    const job = await login(user, configDir, '--name', 'nightly', '--read-only');
    expect([...(await refreshTokensOf(user)).keys()]).toEqual([job.session_id]);
    expect(full.session_id).not.toBe(job.session_id);

    // A read-only login over a read-only one: the replaced one still revokes itself (a token
    // may always end its own session, read-only or not).
    const again = await realmgate(
      ['login', org, user.username, '--password-stdin', '--read-only'],
      configDir,
      `${user.password}\n`,
    );
    expect(again).toMatchObject({ code: 0, stderr: '' });
    const { session_id: last } = JSON.parse(again.stdout) as { session_id: string };
    expect([...(await refreshTokensOf(user)).keys()]).toEqual([last]);
  });

  it('binds a password grant, calls the API with DPoP and refreshes, as the page shows', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const keyFile = join(root, 'script-key.json');
    const url = tokenUrl(org);
    const grant = await postToken(`${testEnv().publicUrl}/auth`, org, passwordGrantBody(user), {
      dpop: await scriptProof(keyFile, 'POST', url),
    });
    expect(grant.status).toBe(200);
    expect(grant.json.token_type).toBe('DPoP');
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    const access = String(grant.json.access_token);

    const api = `${testEnv().publicUrl}/api/${org}/platform/workspaces`;
    const call = await callApi(`/api/${org}/platform/workspaces`, `DPoP ${access}`, {
      headers: { dpop: await scriptProof(keyFile, 'GET', api, access) },
    });
    expect(call.status, JSON.stringify(call.body)).toBe(200);

    const refresh = String(grant.json.refresh_token);
    expect((await refreshGrant(org, refresh, await scriptProof(keyFile, 'POST', url))).status).toBe(
      200,
    );
  });
});

/** The user's refresh tokens by id, as the API lists them (asked with Basic). */
async function refreshTokensOf(user: TestUser): Promise<Map<unknown, Record<string, unknown>>> {
  const path = `/api/${user.realm}/platform/users/_current/refresh_tokens`;
  const list = await callApi(path, basicAuth(user));
  expect(list.status).toBe(200);
  const records = list.body.data as Array<Record<string, unknown>>;
  return new Map(records.map((record) => [record.id, record]));
}
