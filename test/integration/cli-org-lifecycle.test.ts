import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import { capturingIo, piped } from '../helpers/cli-io.ts';
import { createUser, keycloakAdmin, uniqueId, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, testDb } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

/** Runs the CLI against the test gateway as `env`'s administrator; stdin is a pipe. */
async function realmgate(argv: string[], env: Record<string, string>, stdin = '') {
  const { io, output } = capturingIo(piped(stdin));
  const code = await runCli(argv, { REALMGATE_URL: testEnv().publicUrl, ...env }, io);
  return { code, ...output, data: code === 0 ? (JSON.parse(output.stdout) as unknown) : undefined };
}

describe('realmgate org and workspace lifecycle against the real gateway', () => {
  let basic: Record<string, string>;
  let org: string;
  let member: TestUser;
  afterAll(closeTestDb);
  beforeAll(async () => {
    const admin = await createUser('master');
    basic = { REALMGATE_USERNAME: admin.username, REALMGATE_PASSWORD: admin.password };
    org = uniqueId('clilife-');
    expect((await realmgate(['org', 'create', org, '--name', 'Life'], basic)).code).toBe(0);
    for (const ws of ['ws1', 'ws2']) {
      expect((await realmgate(['workspace', 'create', org, ws], basic)).code).toBe(0);
      expect((await realmgate(['operation', 'add', org, ws, '--name', 'Op'], basic)).code).toBe(0);
    }
    member = await createUser(org, { workspaceRoles: ['ws1'] });
  });

  it('lists and gets organizations', async () => {
    const got = await realmgate(['org', 'get', org], basic);
    expect(got).toMatchObject({ code: 0, data: { id: org, name: 'Life', enabled: true } });
    const list = await realmgate(['org', 'list'], basic);
    expect(list.code).toBe(0);
    expect(list.data).toContainEqual(got.data);
    const unknown = await realmgate(['org', 'get', 'no-such-org'], basic);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('404-00001');
  });

  it('lists and deletes workspaces', async () => {
    const list = await realmgate(['workspace', 'list', org], basic);
    expect((list.data as { id: string }[]).map((ws) => ws.id)).toEqual(['ws1', 'ws2']);
    const deleted = await realmgate(['workspace', 'delete', org, 'ws2'], basic);
    expect(deleted).toMatchObject({ code: 0, data: { id: 'ws2' } });
    const after = await realmgate(['workspace', 'list', org], basic);
    expect((after.data as { id: string }[]).map((ws) => ws.id)).toEqual(['ws1']);
    expect(
      await testDb()('operations').where({ organization_id: org, workspace_id: 'ws2' }),
    ).toEqual([]);
    const again = await realmgate(['workspace', 'delete', org, 'ws2'], basic);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('404-00002');
  });

  it('disables and enables an organization', async () => {
    const route = `/api/${org}/platform/workspaces`;
    expect((await callApi(route, basicAuth(member))).status).toBe(200);
    const disabled = await realmgate(['org', 'disable', org], basic);
    expect(disabled).toMatchObject({ code: 0, data: { id: org, enabled: false } });
    expect((await callApi(route, basicAuth(member))).body.result).toBe('403-23001');
    const enabled = await realmgate(['org', 'enable', org], basic);
    expect(enabled).toMatchObject({ code: 0, data: { id: org, enabled: true } });
    expect((await callApi(route, basicAuth(member))).status).toBe(200);
  });

  it('deletes an organization only with --yes when no terminal asks', async () => {
    const refused = await realmgate(['org', 'delete', org], basic, `${org}\n`);
    expect(refused.code).toBe(2);
    expect((await realmgate(['org', 'get', org], basic)).code).toBe(0);
    const deleted = await realmgate(['org', 'delete', org, '--yes'], basic);
    expect(deleted).toMatchObject({ code: 0, data: { id: org, name: 'Life' } });
    expect(await (await keycloakAdmin()).realms.findOne({ realm: org })).toBeFalsy();
    const gone = await realmgate(['org', 'get', org], basic);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain('404-00001');
    const again = await realmgate(['org', 'delete', org, '--yes'], basic);
    expect(again.stderr).toContain('404-00001');
  });
});
