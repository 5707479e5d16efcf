import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.ts';
import { accessTokenOf, basicAuth, callApi } from '../helpers/api.ts';
import { capturingIo, piped } from '../helpers/cli-io.ts';
import { createUser, uniqueId, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

/** Runs the CLI against the test gateway; `stdin` is what a pipe feeds it. */
async function realmgate(argv: string[], env: Record<string, string>, stdin = '') {
  const { io, output } = capturingIo(piped(stdin));
  const code = await runCli(argv, { REALMGATE_URL: testEnv().publicUrl, ...env }, io);
  return {
    code,
    ...output,
    data: code === 0 ? (JSON.parse(output.stdout) as unknown) : undefined,
  };
}

describe('realmgate user lifecycle commands against the real gateway', () => {
  let env: Record<string, string>;
  let org: string;
  afterAll(closeTestDb);
  beforeAll(async () => {
    const admin = await createUser('master');
    env = { REALMGATE_USERNAME: admin.username, REALMGATE_PASSWORD: admin.password };
    org = await createOrganization(['ws1']);
  });

  it('lists and gets users', async () => {
    const prefix = uniqueId('cl');
    for (const name of ['b', 'a']) await createUser(org, { username: `${prefix}-${name}` });
    const listed = await realmgate(
      ['user', 'list', org, '--search', prefix, '--first', '1', '--max', '5'],
      env,
    );
    expect(listed).toMatchObject({ code: 0, data: [{ username: `${prefix}-b`, realm: org }] });
    const got = await realmgate(['user', 'get', org, `${prefix}-a`], env);
    expect(got).toMatchObject({ code: 0, data: { username: `${prefix}-a`, workspaces: [] } });
    const missing = await realmgate(['user', 'get', org, 'nobody'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('404-00003');
  });

  it('disables, enables and deletes a user', async () => {
    const user = await createUser(org);
    const listing = `/api/${org}/platform/workspaces`;
    expect((await callApi(listing, basicAuth(user))).status).toBe(200);
    const disabled = await realmgate(['user', 'disable', org, user.username], env);
    expect(disabled).toMatchObject({ code: 0, data: { enabled: false } });
    expect((await callApi(listing, basicAuth(user))).status).toBe(401);
    const enabled = await realmgate(['user', 'enable', org, user.username], env);
    expect(enabled).toMatchObject({ code: 0, data: { enabled: true } });
    expect(await accessTokenOf(user)).toMatch(/^ey/);
    expect((await realmgate(['user', 'delete', org, user.username], env)).code).toBe(0);
    const again = await realmgate(['user', 'delete', org, user.username], env);
    expect(again).toMatchObject({ code: 1 });
    expect(again.stderr).toContain('404-00003');
  });

  it('sets a password read from stdin, never printed', async () => {
    const user = await createUser(org);
    const listing = `/api/${org}/platform/workspaces`;
    const password = 'piped: new pässword 2';
    const changed = await realmgate(
      ['user', 'passwd', org, user.username, '--password-stdin'],
      env,
      `${password}\n`,
    );
    expect(changed).toMatchObject({ code: 0, stderr: '', data: { username: user.username } });
    expect(changed.stdout).not.toContain(password);
    expect((await callApi(listing, basicAuth({ ...user, password }))).status).toBe(200);
    expect((await callApi(listing, basicAuth(user))).status).toBe(401);
  });

  it('grants and revokes a workspace role', async () => {
    const user: TestUser = await createUser(org);
    const granted = await realmgate(['user', 'grant', org, user.username, 'ws1'], env);
    expect(granted).toMatchObject({ code: 0, data: { workspaces: ['ws1'] } });
    const token = await accessTokenOf(user);
    const route = `/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/`;
    expect((await callApi(route, `Bearer ${token}`)).status).toBe(200);
    const revoked = await realmgate(['user', 'revoke', org, user.username, 'ws1'], env);
    expect(revoked).toMatchObject({ code: 0, data: { workspaces: [] } });
    expect((await callApi(route, `Bearer ${token}`)).status).toBe(401);
  });

  it('answers protected accounts with 403-00002', async () => {
    const refused = await realmgate(
      ['user', 'disable', 'master', testEnv().keycloakAdminUsername],
      env,
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('403-00002');
  });
});
