import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import {
  createUser,
  createPublicClient,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  uniqueId,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';
import { capturingIo, piped } from '../helpers/cli-io.ts';

let root: string;

async function realmgate(argv: string[], env: Record<string, string>, stdin = '') {
  const { io, output } = capturingIo(piped(stdin));
  const code = await runCli(argv, { REALMGATE_URL: testEnv().publicUrl, ...env }, io);
  return { code, ...output };
}

/** The API client's DPoP switch as Keycloak's console shows it (its admin API). */
async function consoleValue(org: string): Promise<string | undefined> {
  const admin = await keycloakAdmin();
  const [client] = await admin.clients.find({ realm: org, clientId: apiClientIdOf(org) });
  return client?.attributes?.['dpop.bound.access.tokens'] as string | undefined;
}

/** The spec's password grant through /auth, as a client that knows nothing of DPoP sends it. */
function plainGrant(user: TestUser) {
  return postToken(`${testEnv().publicUrl}/auth`, user.realm, passwordGrantBody(user));
}

describe("the administrators' DPoP switch of an organization's API client", () => {
  let org: string;
  let administrator: TestUser;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'realmgate-dpop-switch-'));
    org = await createOrganization(['ws1']);
    administrator = await createUser('master');
  });
  afterAll(async () => {
    await closeTestDb();
    await rm(root, { recursive: true, force: true });
  });

  it('is switched on by the CLI (Keycloak then wants a proof) and off by the API', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const asAdministrator = {
      REALMGATE_USERNAME: administrator.username,
      REALMGATE_PASSWORD: administrator.password,
    };
    expect(await consoleValue(org)).toBeUndefined();
    const on = await realmgate(
      ['lifetimes', 'set', org, '--dpop-required', 'true'],
      asAdministrator,
    );
    expect(on, on.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(on.stdout)).toMatchObject({ dpop_bound_access_tokens: true });
    expect(await consoleValue(org)).toBe('true');

    // A client that sends no proof is refused by Keycloak, in words that name DPoP.
    const refused = await plainGrant(user);
    expect(refused.status).toBe(400);
    expect(refused.json).toEqual({
      error: 'invalid_request',
      error_description: 'DPoP proof is missing',
    });

    // Basic is served: the gateway's own login carries a proof (merged from dpop-gateway).
    const basic = await callApi(`/api/${org}/platform/workspaces`, basicAuth(user));
    expect(basic.status, JSON.stringify(basic.body)).toBe(200);

    // The CLI binds its login and is served.
    const configDir = join(root, 'cli');
    const login = await realmgate(
      ['login', org, user.username, '--password-stdin'],
      { REALMGATE_CONFIG_DIR: configDir },
      `${user.password}\n`,
    );
    expect(login, login.stderr).toMatchObject({ code: 0, stderr: '' });
    const { session_id: sessionId, dpop_jkt: jkt } = JSON.parse(login.stdout) as Record<
      string,
      unknown
    >;
    expect(jkt).toEqual(expect.any(String));
    const listed = await realmgate(['tokens', 'list'], { REALMGATE_CONFIG_DIR: configDir });
    expect(listed, listed.stderr).toMatchObject({ code: 0, stderr: '' });
    expect(JSON.parse(listed.stdout)).toEqual([
      expect.objectContaining({ id: sessionId, dpop_jkt: jkt }),
    ]);

    // Off through the API: written "false" (Keycloak keeps an attribute an update leaves out).
    const off = await callApi(
      `/api/platform/organizations/${org}/token-lifetimes`,
      basicAuth(administrator),
      {
        method: 'PATCH',
        body: { dpop_bound_access_tokens: false },
      },
    );
    expect(off.status).toBe(200);
    expect(off.body.data).toMatchObject({ dpop_bound_access_tokens: false });
    expect(await consoleValue(org)).toBe('false');
    const shown = await callApi(
      `/api/platform/organizations/${org}/token-lifetimes`,
      basicAuth(administrator),
    );
    expect(shown.body.data).toMatchObject({ dpop_bound_access_tokens: false });
    const served = await plainGrant(user);
    expect(served.status).toBe(200);
    expect(served.json.token_type).toBe('Bearer');
  });

  it('is not held, nor described, in an organization made again under the id of one deleted with it on', async () => {
    const admin = basicAuth(administrator);
    const again = uniqueId('dpop-again-');
    const organizations = '/api/platform/organizations';
    const made = () =>
      callApi(organizations, admin, { method: 'POST', body: { id: again, name: 'A' } });
    expect((await made()).status).toBe(200);
    const on = await callApi(`${organizations}/${again}/token-lifetimes`, admin, {
      method: 'PATCH',
      body: { dpop_bound_access_tokens: true },
    });
    expect(on.status).toBe(200);
    const deleted = await callApi(`${organizations}/${again}?confirm=${again}`, admin, {
      method: 'DELETE',
    });
    expect(deleted.status).toBe(200);
    // The id may name a new organization at once; its realm is made from the template, off.
    expect((await made()).status).toBe(200);
    expect(await consoleValue(again)).toBeUndefined();

    // A client the realm's administrator added beside the API client: the switch holds its tokens.
    await createPublicClient(again, 'job-runner');
    const member = await createUser(again);
    const signedIn = await postToken(
      `${testEnv().publicUrl}/auth`,
      again,
      `grant_type=password&client_id=job-runner&username=${encodeURIComponent(member.username)}` +
        `&password=${encodeURIComponent(member.password)}`,
    );
    expect(signedIn.status).toBe(200);
    const unbound = await callApi(
      `/api/${again}/platform/workspaces`,
      `Bearer ${String(signedIn.json.access_token)}`,
    );
    expect(unbound.status, JSON.stringify(unbound.body)).toBe(200);
    const metadata = await fetch(
      `${testEnv().publicUrl}/.well-known/oauth-protected-resource/api/${again}`,
    );
    expect(await metadata.json()).toMatchObject({ dpop_bound_access_tokens_required: false });
  });
});
