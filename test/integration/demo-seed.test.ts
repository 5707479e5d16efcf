import { randomBytes } from 'node:crypto';
import knex, { type Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { currentTotp } from '../helpers/totp.ts';
import { DEMO, seedDemo } from '../../src/demo/seed-demo.ts';
import { createOperationsRepo } from '../../src/automation/operations.repo.ts';
import { createWorkspacesRepo } from '../../src/platform/workspaces.repo.ts';
import {
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  testBackchannelUrl,
} from '../helpers/keycloak.ts';
import { testEnv } from '../helpers/test-env.ts';

describe('demo data', () => {
  let db: Knex;
  const password = randomBytes(12).toString('base64url');
  const otpSecret = randomBytes(10).toString('hex');

  beforeAll(async () => {
    db = knex({ client: 'pg', connection: testEnv().databaseUrl });
    const deps = {
      admin: await keycloakAdmin(),
      db,
      gatewayClientSecret: testEnv().gatewayClientSecret,
      backchannelLogoutUrl: testBackchannelUrl(),
      demoPassword: password,
      otpSecret,
    };
    await seedDemo(deps);
    // A second start must find everything in place and change nothing.
    await seedDemo(deps);
  });

  afterAll(async () => {
    await db.destroy();
  });

  it('creates demo-org with workspace demo-ws holding three operations, once', async () => {
    const workspaces = await createWorkspacesRepo(db).listByOrganization(DEMO.organization);
    expect(workspaces.map((w) => w.id)).toEqual([DEMO.workspace]);
    const operations = await createOperationsRepo(db).listByWorkspace(
      DEMO.organization,
      DEMO.workspace,
    );
    expect(operations).toHaveLength(3);
  });

  it('lets every demo user log in with the demo password (demo-otp only with a one-time password)', async () => {
    const gateway = `${testEnv().publicUrl}/auth`;
    const login = (realm: string, username: string, extra = '') =>
      postToken(gateway, realm, passwordGrantBody({ realm, username, password }, extra));

    expect((await login('master', DEMO.adminUser)).status).toBe(200);
    expect((await login(DEMO.organization, DEMO.user)).status).toBe(200);
    expect((await login(DEMO.organization, DEMO.outsider)).status).toBe(200);
    expect((await login(DEMO.organization, DEMO.otpUser)).status).toBe(401);
    expect(
      (await login(DEMO.organization, DEMO.otpUser, `&totp=${currentTotp(otpSecret)}`)).status,
    ).toBe(200);
  });
});
