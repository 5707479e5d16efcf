import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
import { currentTotp } from '../helpers/totp.ts';
import { cliOfTestGateway } from '../helpers/cli-run.ts';

let root: string;
/** Every secret seen so far; no CLI output may contain one. */
const secrets = new Set<string>();

/**
 * This suite shows bearer logins (`--no-dpop`, as a login made before the CLI bound its tokens
 * is), whose tokens a script sends as `Bearer`; cli-dpop.test.ts shows bound ones.
 */
const { realmgate, storedLogins } = cliOfTestGateway(secrets, ['--no-dpop']);

/** Logs `user` in with what `stdin` holds (the password, then any one-time password). */
const logIn = (user: TestUser, configDir: string, stdin = user.password) =>
  realmgate(['login', user.realm, user.username, '--password-stdin'], configDir, stdin);

function refreshGrant(realm: string, refreshToken: string) {
  const client = realm === 'master' ? '_platform-api' : `_${realm}-api`;
  return postToken(
    `${testEnv().publicUrl}/auth`,
    realm,
    `client_id=${client}&grant_type=refresh_token&refresh_token=${refreshToken}`,
  );
}

/** Another refresh token of the user, as a second device would get it. */
async function otherSession(user: TestUser): Promise<{ refreshToken: string; id: string }> {
  const grant = await postToken(`${testEnv().publicUrl}/auth`, user.realm, passwordGrantBody(user));
  const refreshToken = String(grant.json.refresh_token);
  secrets.add(refreshToken);
  return { refreshToken, id: String(claimsOf(grant.json.access_token).sid) };
}

const tokensPath = (realm: string) =>
  realm === 'master'
    ? '/api/platform/users/_current/refresh_tokens'
    : `/api/${realm}/platform/users/_current/refresh_tokens`;

describe('realmgate login, token, tokens and logout against the real gateway', () => {
  let org: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'realmgate-cli-login-'));
    org = await createOrganization(['ws1', 'ws2']);
  });
  afterAll(async () => {
    await closeTestDb();
    await rm(root, { recursive: true, force: true });
  });

  it('logs in with the password on stdin, keeps the refresh token 0600, and logs out', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    secrets.add(user.password);
    const configDir = join(root, 'a', 'realmgate');
    const login = await realmgate(
      ['login', org, user.username, '--password-stdin'],
      configDir,
      `${user.password}\n`,
    );
    expect(login).toMatchObject({ code: 0, stderr: '' });
    const summary = JSON.parse(login.stdout) as Record<string, unknown>;
    expect(summary).toMatchObject({ realm: org, username: user.username.toLowerCase() });
    // The file and its directory are the user's alone.
    expect((await stat(configDir)).mode & 0o777).toBe(0o700);
    expect((await stat(join(configDir, 'credentials.json'))).mode & 0o777).toBe(0o600);
    const [stored] = await storedLogins(configDir);
    expect(stored).toMatchObject({ realm: org, sessionId: summary.session_id });

    // `token` prints an access token the API takes, and reuses it while it is fresh.
    const token = await realmgate(['token'], configDir);
    expect(token.code).toBe(0);
    const accessToken = token.stdout.trim();
    const workspaces = `/api/${org}/platform/workspaces`;
    expect((await callApi(workspaces, `Bearer ${accessToken}`)).status).toBe(200);
    expect((await realmgate(['token', '--realm', org], configDir)).stdout.trim()).toBe(accessToken);

    // Logging in again replaces the entry and revokes the session it replaces.
    expect(
      (await realmgate(['login', org, user.username, '--password-stdin'], configDir, user.password))
        .code,
    ).toBe(0);
    const logins = await storedLogins(configDir);
    expect(logins).toHaveLength(1);
    expect(logins[0]!.sessionId).not.toBe(stored!.sessionId);
    expect((await refreshGrant(org, stored!.refreshToken)).status).toBe(400);
    const listed = await realmgate(['tokens', 'list'], configDir);
    expect(listed.code).toBe(0);
    expect((JSON.parse(listed.stdout) as Array<{ id: string }>).map((t) => t.id)).toEqual([
      logins[0]!.sessionId,
    ]);

    // `tokens revoke <id>` revokes that one only.
    const other = await otherSession(user);
    expect((await realmgate(['tokens', 'revoke', other.id], configDir)).code).toBe(0);
    expect((await refreshGrant(org, other.refreshToken)).status).toBe(400);
    expect((await refreshGrant(org, logins[0]!.refreshToken)).status).toBe(200);

    // `logout` revokes the stored refresh token alone; its access tokens stop at once.
    const kept = await otherSession(user);
    const current = (await realmgate(['token'], configDir)).stdout.trim();
    expect((await callApi(workspaces, `Bearer ${current}`)).status).toBe(200);
    const logout = await realmgate(['logout'], configDir);
    expect(logout).toMatchObject({ code: 0, stdout: '' });
    expect(logout.stderr).toContain(`logged out ${user.username.toLowerCase()}`);
    expect((await callApi(workspaces, `Bearer ${current}`)).status).toBe(401);
    expect((await refreshGrant(org, logins[0]!.refreshToken)).status).toBe(400);
    expect((await refreshGrant(org, kept.refreshToken)).status).toBe(200);
    expect(await storedLogins(configDir)).toEqual([]);
    const after = await realmgate(['token'], configDir);
    expect(after.code).toBe(2);
    expect(after.stderr).toContain('no stored login');
  });

  it('revokes every token with --all, and says to log in again once the login is revoked', async () => {
    const admin = await createUser('master');
    secrets.add(admin.password);
    const configDir = join(root, 'b');
    expect((await logIn(admin, configDir)).code).toBe(0);
    // Administrators' commands use the stored master-realm login when the environment has none.
    expect(await realmgate(['lifetimes', 'show', 'master'], configDir)).toMatchObject({ code: 0 });

    const other = await otherSession(admin);
    const [stored] = await storedLogins(configDir);
    const all = await realmgate(['tokens', 'revoke', '--all'], configDir);
    expect(all).toMatchObject({ code: 0, stdout: 'null\n' });
    expect(all.stderr).toContain('revoked the stored login');
    expect((await refreshGrant('master', other.refreshToken)).status).toBe(400);
    expect((await refreshGrant('master', stored!.refreshToken)).status).toBe(400);
    expect(await storedLogins(configDir)).toEqual([]);

    // Revoked outside the CLI: the cached access token is refused, the refresh token too.
    expect((await logIn(admin, configDir)).code).toBe(0);
    const revoked = await callApi(tokensPath('master'), basicAuth(admin), { method: 'DELETE' });
    expect(revoked.status).toBe(200);
    const refused = await realmgate(['lifetimes', 'show', 'master'], configDir);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`log in again: realmgate login master ${admin.username}`);
    // Without a cached access token, `token` says the same.
    const file = join(configDir, 'credentials.json');
    const [entry] = await storedLogins(configDir);
    const withoutAccess = { ...entry!, accessToken: undefined, accessExpiresAt: undefined };
    await writeFile(file, JSON.stringify({ version: 1, logins: [withoutAccess] }), { mode: 0o600 });
    const token = await realmgate(['token'], configDir);
    expect(token.code).toBe(1);
    expect(token.stderr).toContain('has expired or was revoked');
    // logout forgets a login that is no longer valid.
    expect((await realmgate(['logout'], configDir)).code).toBe(0);
    expect(await storedLogins(configDir)).toEqual([]);
  });

  it('logs a job in with a name, one workspace, read-only and a lifetime; revokes it by name', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1', 'ws2'] });
    secrets.add(user.password);
    const jobDir = join(root, 'job');
    const login = await realmgate(
      [
        'login',
        org,
        user.username,
        '--password-stdin',
        '--name',
        'nightly',
        '--workspace',
        'ws1',
        '--read-only',
        '--expires',
        '2d',
      ],
      jobDir,
      user.password,
    );
    expect(login).toMatchObject({ code: 0, stderr: '' });
    const summary = JSON.parse(login.stdout) as Record<string, unknown>;
    expect(summary).toMatchObject({ name: 'nightly', workspaces: ['ws1'], read_only: true });
    // The lifetime asked for, not Keycloak's year.
    expect(Date.parse(String(summary.expire_timestamp))).toBeLessThanOrEqual(
      Date.now() + 2 * 86_400_000,
    );
    const token = (await realmgate(['token'], jobDir)).stdout.trim();
    const ws1 = `/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/`;
    expect((await callApi(ws1, `Bearer ${token}`)).status).toBe(200);
    expect((await callApi(ws1.replace('ws1', 'ws2'), `Bearer ${token}`)).body.result).toBe(
      '403-30001',
    );

    const listed = await realmgate(['tokens', 'list'], jobDir);
    const [record] = JSON.parse(listed.stdout) as Array<Record<string, unknown>>;
    expect(record).toMatchObject({
      id: summary.session_id,
      name: 'nightly',
      workspaces: ['ws1'],
      read_only: true,
      last_use: { client_address: expect.any(String) as string },
    });

    // Revoked by name from another login of the user: the job's token stops at once.
    const own = join(root, 'own');
    await realmgate(['login', org, user.username, '--password-stdin'], own, user.password);
    expect((await realmgate(['tokens', 'revoke', 'nightly'], own)).code).toBe(0);
    expect((await callApi(ws1, `Bearer ${token}`)).status).toBe(401);
  });

  it('logs a read-only login out: its own session ends, the user’s other sessions stay', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    secrets.add(user.password);
    const jobDir = join(root, 'read-only-logout');
    const login = await realmgate(
      ['login', org, user.username, '--password-stdin', '--name', 'ro-job', '--read-only'],
      jobDir,
      user.password,
    );
    expect(login).toMatchObject({ code: 0, stderr: '' });
    const { session_id: ownId } = JSON.parse(login.stdout) as { session_id: string };
    const other = await otherSession(user);
    const token = (await realmgate(['token'], jobDir)).stdout.trim();
    const ids = async () =>
      ((await callApi(tokensPath(org), basicAuth(user))).body.data as Array<{ id: string }>).map(
        (t) => t.id,
      );
    expect(await ids()).toEqual(expect.arrayContaining([ownId, other.id]));

    const logout = await realmgate(['logout'], jobDir);
    expect(logout, logout.stderr).toMatchObject({ code: 0, stdout: '' });
    expect(logout.stderr).toContain(`logged out ${user.username.toLowerCase()}`);
    expect(await storedLogins(jobDir)).toEqual([]);
    const left = await ids();
    expect(left).not.toContain(ownId);
    expect(left).toContain(other.id);
    expect((await callApi(`/api/${org}/platform/workspaces`, `Bearer ${token}`)).status).toBe(401);
    expect((await refreshGrant(org, other.refreshToken)).status).toBe(200);
  });

  it('says a wrong password was refused (the token endpoint answers it 401)', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const wrong = await realmgate(
      ['login', org, user.username, '--password-stdin'],
      join(root, 'd'),
      'not-the-password\n',
    );
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('login refused: Invalid user credentials');
  });

  it('logs in a two-factor user with the one-time password on stdin', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'], otp: true });
    secrets.add(user.password);
    const configDir = join(root, 'c');
    const without = await realmgate(
      ['login', org, user.username, '--password-stdin'],
      configDir,
      `${user.password}\n`,
    );
    expect(without.code).toBe(1);
    expect(without.stderr).toContain("put the one-time password on stdin's second line");
    // No pause before the retry: the realms' quick-login check is off (brute-force.test.ts).
    const login = await realmgate(
      ['login', org, user.username, '--password-stdin'],
      configDir,
      `${user.password}\n${currentTotp(user.otpSecret!)}\n`,
    );
    expect(login).toMatchObject({ code: 0, stderr: '' });
    const token = (await realmgate(['token', '--user', user.username], configDir)).stdout.trim();
    expect((await callApi(`/api/${org}/platform/workspaces`, `Bearer ${token}`)).status).toBe(200);
    expect((await realmgate(['logout', '--realm', org], configDir)).code).toBe(0);
  });
});
