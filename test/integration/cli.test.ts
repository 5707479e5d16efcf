import { authenticator } from 'otplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import { capturingIo, piped } from '../helpers/cli-io.ts';
import { createUser, postToken, uniqueId, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * Runs the CLI against the test gateway and captures what it prints. `stdin` is what a pipe
 * feeds it (for --password-stdin).
 */
async function realmgate(argv: string[], env: Record<string, string>, stdin = '') {
  const { io, output } = capturingIo(piped(stdin));
  const code = await runCli(argv, { REALMGATE_URL: testEnv().publicUrl, ...env }, io);
  const { stdout, stderr } = output;
  return {
    code,
    stdout,
    stderr,
    data: code === 0 ? (JSON.parse(stdout) as Record<string, unknown>) : undefined,
  };
}

describe('realmgate CLI against the real gateway', () => {
  let admin: TestUser;
  let basic: Record<string, string>;
  afterAll(closeTestDb);
  beforeAll(async () => {
    admin = await createUser('master');
    basic = { REALMGATE_USERNAME: admin.username, REALMGATE_PASSWORD: admin.password };
  });

  it('provisions an organization end to end, and its users can use it', async () => {
    const org = uniqueId('cli-');
    expect(await realmgate(['org', 'create', org, '--name', 'CLI Corp.'], basic)).toMatchObject({
      code: 0,
      data: { id: org, name: 'CLI Corp.' },
    });
    expect(
      (await realmgate(['workspace', 'create', org, 'prod', '--environment', 'eu'], basic)).code,
    ).toBe(0);
    expect(
      (await realmgate(['operation', 'add', org, 'prod', '--name', 'Patch'], basic)).code,
    ).toBe(0);
    const operationList = `/api/${org}/workspaces/prod/ita/menu/operation_list/filter/`;

    // bob's password comes from a pipe, as in `printf '%s\n' "$PW" | realmgate ...`.
    const bob = { realm: org, username: 'bob', password: 'pipe:d pässword 1' };
    const piped = await realmgate(
      ['user', 'create', org, 'bob', '--password-stdin', '--workspace', 'prod'],
      basic,
      `${bob.password}\n`,
    );
    expect(piped).toMatchObject({
      code: 0,
      stderr: '',
      data: { username: 'bob', realm: org, workspaces: ['prod'] },
    });
    expect(piped.stdout).not.toContain(bob.password);
    // The password arrived as typed, without the newline: bob logs in with Basic.
    const asBob = await callApi(operationList, basicAuth(bob));
    expect(asBob.status).toBe(200);
    expect(asBob.body.data).toMatchObject([{ parameter: { operation_name: 'Patch' } }]);
    expect((await callApi(operationList, basicAuth({ ...bob, password: 'wrong' }))).status).toBe(
      401,
    );

    // alice gets two-factor authentication with a secret the CLI generated and printed once.
    const alice = { realm: org, username: 'alice', password: 'pass:word-1' };
    const created = await realmgate(
      ['user', 'create', org, 'alice', '--password-stdin', '--workspace', 'prod', '--otp'],
      basic,
      alice.password,
    );
    expect(created).toMatchObject({
      code: 0,
      data: { username: 'alice', realm: org, workspaces: ['prod'] },
    });
    expect(created.stdout).not.toContain(alice.password);
    const otpSecret = String(created.data!.otp_secret);
    expect(otpSecret).toMatch(/^[A-Z2-7]{32}$/);
    expect(created.data!.otpauth_uri).toBe(
      `otpauth://totp/realmgate:alice?secret=${otpSecret}&issuer=realmgate`,
    );

    // A token needs the one-time password computed from the printed secret.
    const form = `client_id=_${org}-api&grant_type=password&scope=openid&username=alice&password=pass%3Aword-1`;
    const withoutTotp = await postToken(`${testEnv().publicUrl}/auth`, org, form);
    expect(withoutTotp.status).not.toBe(200);
    const totp = authenticator.generate(otpSecret);
    const token = await postToken(`${testEnv().publicUrl}/auth`, org, `${form}&totp=${totp}`);
    expect(token.status).toBe(200);
    const operations = await callApi(operationList, `Bearer ${String(token.json.access_token)}`);
    expect(operations.status).toBe(200);
    expect(operations.body.data).toMatchObject([{ parameter: { operation_name: 'Patch' } }]);
    expect((await callApi(`/api/${org}/platform/workspaces`, basicAuth(alice))).status).toBe(401);
  });

  it('refuses secrets on the command line and a password with no terminal or pipe', async () => {
    const org = uniqueId('cli-');
    expect((await realmgate(['org', 'create', org], basic)).code).toBe(0);
    const onArgv = await realmgate(
      ['user', 'create', org, 'carol', '--password', 'S3cret:pw'],
      basic,
    );
    expect(onArgv.code).toBe(2);
    expect(onArgv.stderr).toContain('secrets are never taken from the command line');
    expect(onArgv.stderr).not.toContain('S3cret:pw');
    const noTerminal = await realmgate(['user', 'create', org, 'carol'], basic, 'S3cret:pw\n');
    expect(noTerminal.code).toBe(2);
    expect(noTerminal.stderr).toContain('--password-stdin');
    // Neither call reached Keycloak: carol does not exist.
    const carol = { realm: org, username: 'carol', password: 'S3cret:pw' };
    expect((await callApi(`/api/${org}/platform/workspaces`, basicAuth(carol))).status).toBe(401);
  });

  it('shows and sets token lifetimes with a Bearer token', async () => {
    const org = uniqueId('cli-');
    expect((await realmgate(['org', 'create', org], basic)).code).toBe(0);
    const grant = await postToken(
      `${testEnv().publicUrl}/auth`,
      'master',
      `client_id=_platform-api&grant_type=password&scope=openid&username=${admin.username}&password=${encodeURIComponent(admin.password)}`,
    );
    const bearer = { REALMGATE_TOKEN: String(grant.json.access_token) };
    const set = await realmgate(
      ['lifetimes', 'set', org, '--access', '2h', '--offline-idle', '30d'],
      bearer,
    );
    expect(set).toMatchObject({
      code: 0,
      data: { access_token_lifespan: 7200, offline_session_idle_timeout: 2592000 },
    });
    expect(await realmgate(['lifetimes', 'show', org], bearer)).toMatchObject({
      code: 0,
      data: { access_token_lifespan: 7200 },
    });
  });

  it('exits 1 with the result code when the API refuses, and 2 on usage errors', async () => {
    const refused = await realmgate(['workspace', 'create', 'no-such-org', 'ws'], basic);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('404-00001');
    const wrongPassword = await realmgate(['lifetimes', 'show', 'master'], {
      ...basic,
      REALMGATE_PASSWORD: 'nope',
    });
    expect(wrongPassword.code).toBe(1);
    expect(wrongPassword.stderr).toContain('401-00002');
    expect((await realmgate(['org', 'create'], basic)).code).toBe(2);
  });
});
