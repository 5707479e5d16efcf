import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayProcess, type GatewayProcess } from '../ha/gateway-process.ts';
import { createUser, passwordGrantBody, postToken, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * Node 24 prints no deprecation warning while the gateway serves: `node src/main.ts` in a
 * process of its own (as production runs it, default flags), its output kept, serving `/auth`,
 * the forwarded automation route and the express routes. Node prints each deprecation once per
 * process, on first use, so one request of each kind is enough to show it.
 */
describe('no deprecation warning on Node 24', () => {
  let dir: string;
  let logFile: string;
  let upstream: RecordingUpstream;
  let gateway: GatewayProcess;
  let org: string;
  let user: TestUser;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'realmgate-deprecations-'));
    logFile = path.join(dir, 'gateway.log');
    upstream = await startRecordingUpstream();
    const env = testEnv();
    gateway = await startGatewayProcess(
      {
        HOST: '127.0.0.1',
        PORT: '19230',
        ADMIN_HOST: '127.0.0.1',
        ADMIN_PORT: '19231',
        PUBLIC_URL: env.publicUrl,
        ADMIN_PUBLIC_URL: 'http://127.0.0.1:19231',
        KEYCLOAK_URL: env.keycloakUrl,
        KEYCLOAK_ADMIN_USERNAME: env.keycloakAdminUsername,
        KEYCLOAK_ADMIN_PASSWORD: env.keycloakAdminPassword,
        KEYCLOAK_CLIENT_SECRET: env.gatewayClientSecret,
        DATABASE_URL: env.databaseUrl,
        DATA_DIR: path.join(dir, 'data'),
        AUTOMATION_UPSTREAM_URL: upstream.url,
        LOG_LEVEL: 'info',
      },
      logFile,
    );
    org = await createOrganization(['ws1']);
    user = await createUser(org, { workspaceRoles: ['ws1'] });
  });
  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
    await closeTestDb();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serving /auth, the forwarded route and the express routes', async () => {
    const grant = await postToken(`${gateway.url}/auth`, org, passwordGrantBody(user));
    expect(grant.status).toBe(200);
    const bearer = { authorization: `Bearer ${String(grant.json.access_token)}` };
    const realm = await fetch(`${gateway.url}/auth/realms/${org}`);
    expect(realm.status).toBe(200);
    const forwarded = await fetch(
      `${gateway.url}/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/`,
      { headers: bearer },
    );
    expect(forwarded.status).toBe(200);
    expect(upstream.seen).toHaveLength(1);
    const listed = await fetch(`${gateway.url}/api/${org}/platform/workspaces`, {
      headers: bearer,
    });
    expect(listed.status).toBe(200);
    const sessions = await fetch(
      `${gateway.url}/api/${org}/platform/users/_current/refresh_tokens`,
      { headers: bearer },
    );
    expect(sessions.status).toBe(200);
    const console = await fetch(`${gateway.adminUrl}/auth/admin/master/console/`);
    expect(console.status).toBe(200);
    expect((await fetch(`${gateway.url}/no/such/route`)).status).toBe(404);

    await gateway.stop();
    const output = readFileSync(logFile, 'utf8');
    // It ran and served: its log is there, and the requests above went through it.
    expect(output).toContain('realmgate is listening');
    expect(output).not.toMatch(/DeprecationWarning|\[DEP\d{4}\]/);
    expect(output).not.toMatch(/\(node:\d+\) \w*Warning/);
  });
});
