import knex, { type Knex } from 'knex';
import { authenticator } from 'otplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOperationsRepo } from '../../src/automation/operations.repo.ts';
import { createAdminSession } from '../../src/keycloak/admin-session.ts';
import { loginAsBootstrapAdmin } from '../../src/keycloak/admin-client.ts';
import { createKeycloakCalls } from '../../src/keycloak/keycloak-calls.ts';
import { ensureUser } from '../../src/demo/ensure-user.ts';
import { ensureOrganizationRealm } from '../../src/platform/realm-admin/provisioning.ts';
import { workspacesOfUsers } from '../../src/platform/realm-admin/users.ts';
import type { TokenLifetimesPatch } from '../../src/platform/realm-admin/token-lifetimes.ts';
import { createOrganizationsRepo } from '../../src/platform/organizations.repo.ts';
import {
  createProvisioningService,
  type ProvisioningService,
} from '../../src/platform/provisioning.service.ts';
import {
  claimsOf,
  expectAnswerSeconds,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  uniqueId,
  type TestUser,
} from '../helpers/keycloak.ts';
import { testEnv } from '../helpers/test-env.ts';

const DAY = 86400;
const YEAR = 365 * DAY;

function adminSessionOf(overrides: { keycloakUrl?: string; password?: string } = {}) {
  const env = testEnv();
  return createAdminSession({
    calls: createKeycloakCalls({
      keycloakUrl: overrides.keycloakUrl ?? env.keycloakUrl,
      timeoutMs: 10_000,
    }),
    username: env.keycloakAdminUsername,
    password: overrides.password ?? env.keycloakAdminPassword,
  });
}

/** Password grant through the gateway, as a client of the platform would do it. */
function login(user: TestUser, totp?: string) {
  const extra = totp === undefined ? '' : `&totp=${totp}`;
  return postToken(`${testEnv().publicUrl}/auth`, user.realm, passwordGrantBody(user, extra));
}

describe('admin session', () => {
  it('logs in once and hands out the same client while its token is fresh', async () => {
    const session = adminSessionOf();
    const [first, second] = await Promise.all([session.get(), session.get()]);
    expect(first).toBe(second);
    expect(await session.get()).toBe(first);
    expect((await first.realms.findOne({ realm: 'master' }))?.realm).toBe('master');
  });

  it('answers 401-00001 when Keycloak refuses the administrator', async () => {
    await expect(adminSessionOf({ password: 'wrong-password' }).get()).rejects.toMatchObject({
      code: 'gatewayServiceToken',
      status: 401,
      result: '401-00001',
    });
  });

  it('answers 503-11001 when Keycloak is unreachable', async () => {
    const session = adminSessionOf({ keycloakUrl: 'http://127.0.0.1:9/auth' });
    await expect(session.get()).rejects.toMatchObject({ status: 503, result: '503-11001' });
  });
});

describe('provisioning service', () => {
  let db: Knex;
  let service: ProvisioningService;

  beforeAll(() => {
    db = knex({ client: 'pg', connection: testEnv().databaseUrl });
    service = createProvisioningService({
      adminSession: adminSessionOf(),
      db,
      gatewayClientSecret: testEnv().gatewayClientSecret,
      // No directory here: the replicas' view is shown by organization-created.test.ts.
      announce: () => Promise.resolve(),
    });
  });

  afterAll(async () => {
    await db.destroy();
  });

  /** A fresh organization with the given workspaces, made through the service. */
  async function organizationWith(...workspaceIds: string[]): Promise<string> {
    const id = uniqueId('org-');
    await service.createOrganization({ id, name: `Org ${id}` });
    for (const ws of workspaceIds) await service.createWorkspace(id, { id: ws, name: ws });
    return id;
  }

  describe('organizations', () => {
    it('creates the realm and the row, and a repeat changes nothing', async () => {
      const id = uniqueId('org-');
      const created = await service.createOrganization({ id, name: 'First name' });
      expect(created).toMatchObject({ id, name: 'First name', enabled: true });
      const again = await service.createOrganization({ id, name: 'Second name' });
      expect(again).toEqual(created);
      const realm = await (await keycloakAdmin()).realms.findOne({ realm: id });
      expect(realm?.displayName).toBe('First name');
    });

    it('completes an organization whose realm exists but whose row is missing', async () => {
      const id = uniqueId('org-');
      await ensureOrganizationRealm(await keycloakAdmin(), {
        organizationId: id,
        organizationName: 'Half done',
        gatewayClientSecret: testEnv().gatewayClientSecret,
      });
      expect(await createOrganizationsRepo(db).find(id)).toBeUndefined();
      const created = await service.createOrganization({ id, name: 'Half done' });
      expect(created).toMatchObject({ id, name: 'Half done' });
      expect(await createOrganizationsRepo(db).find(id)).toEqual(created);
    });

    it.each(['master', 'Upper', '1digit', 'a'.repeat(37), 'has space'])(
      'refuses organization id %j with 400-00002',
      async (id) => {
        await expect(service.createOrganization({ id, name: 'x' })).rejects.toMatchObject({
          result: '400-00002',
        });
      },
    );
  });

  describe('workspaces', () => {
    it('creates the roles and the row, idempotently', async () => {
      const org = await organizationWith();
      const input = {
        id: 'ws-a',
        name: 'Workspace A',
        description: 'first',
        environments: ['prod', 'dev'],
      };
      const created = await service.createWorkspace(org, input, 'alice');
      expect(created).toMatchObject({
        id: 'ws-a',
        name: 'Workspace A',
        informations: { description: 'first', environments: [{ name: 'prod' }, { name: 'dev' }] },
        create_user: 'alice',
        last_update_user: 'alice',
      });
      expect(await service.createWorkspace(org, input, 'bob')).toEqual(created);
      const admin = await keycloakAdmin();
      const [client] = await admin.clients.find({ realm: org, clientId: `${org}-workspaces` });
      const roles = await admin.clients.listRoles({ realm: org, id: client!.id! });
      expect(roles.map((r) => r.name).sort()).toEqual(['_ws-a-admin', 'ws-a']);
    });

    it('answers 404-00001 for an unknown organization and 400 for a bad id', async () => {
      await expect(
        service.createWorkspace(uniqueId('org-'), { id: 'ws', name: 'ws' }),
      ).rejects.toMatchObject({ status: 404, result: '404-00001' });
      const org = await organizationWith();
      await expect(service.createWorkspace(org, { id: '_ws', name: 'x' })).rejects.toMatchObject({
        result: '400-00002',
      });
    });
  });

  describe('users', () => {
    it('creates an organization user whose token carries the workspace role', async () => {
      const org = await organizationWith('ws1', 'ws2');
      const user = { realm: org, username: uniqueId('user-'), password: 'pw-1-secret' };
      const created = await service.createUser(org, { ...user, workspaces: ['ws1', 'ws1'] });
      expect(created).toEqual({
        id: expect.any(String) as string,
        username: user.username,
        realm: org,
        workspaces: ['ws1'],
      });
      const { status, json } = await login(user);
      expect(status).toBe(200);
      expect(claimsOf(json.access_token)).toMatchObject({
        sub: created.id,
        resource_access: { [`${org}-workspaces`]: { roles: ['ws1'] } },
      });
    });

    it('refuses an existing user with 409-00001 and changes nothing', async () => {
      const org = await organizationWith('ws1', 'ws2');
      const secret = authenticator.generateSecret(20);
      const user = { realm: org, username: uniqueId('user-'), password: 'old-password' };
      const first = await service.createUser(org, {
        ...user,
        workspaces: ['ws1'],
        otpSecret: secret,
      });
      const admin = await keycloakAdmin();
      const credentialsBefore = await admin.users.getCredentials({ realm: org, id: first.id });
      await expect(
        service.createUser(org, {
          username: user.username,
          password: 'new-password',
          workspaces: ['ws2'],
          otpSecret: authenticator.generateSecret(20),
        }),
      ).rejects.toMatchObject({
        status: 409,
        result: '409-00001',
        message: 'User already exists.',
      });
      expect(await admin.users.getCredentials({ realm: org, id: first.id })).toEqual(
        credentialsBefore,
      );
      expect((await workspacesOfUsers(admin, org, [first.id])).get(first.id)).toEqual(['ws1']);
      const totp = authenticator.generate(secret);
      expect((await login({ ...user, password: 'new-password' }, totp)).status).toBe(401);
      expect((await login(user, totp)).status).toBe(200);
    });

    it('refuses a username that differs from an existing one only in case', async () => {
      const org = await organizationWith();
      const username = uniqueId('case-');
      await service.createUser(org, { username, password: 'first-password' });
      await expect(
        service.createUser(org, { username: username.toUpperCase(), password: 'other-password' }),
      ).rejects.toMatchObject({ status: 409, result: '409-00001' });
      expect((await login({ realm: org, username, password: 'first-password' })).status).toBe(200);
    });

    it('creates a user once when two requests race for the same username', async () => {
      const org = await organizationWith();
      const username = uniqueId('race-');
      const outcomes = await Promise.allSettled(
        ['password-a', 'password-b', 'password-c'].map((password) =>
          service.createUser(org, { username, password }),
        ),
      );
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
      for (const outcome of outcomes.filter((o) => o.status === 'rejected')) {
        expect(outcome.reason).toMatchObject({ status: 409, result: '409-00001' });
      }
      const admin = await keycloakAdmin();
      expect(await admin.users.find({ realm: org, username, exact: true })).toHaveLength(1);
    });

    it("refuses Keycloak's bootstrap administrator with 409 and leaves it working", async () => {
      const env = testEnv();
      await expect(
        service.createUser('master', {
          username: env.keycloakAdminUsername,
          password: 'taken-over-password',
          otpSecret: authenticator.generateSecret(20),
        }),
      ).rejects.toMatchObject({ status: 409, result: '409-00001' });
      const bootstrap = await loginAsBootstrapAdmin({
        keycloakUrl: env.keycloakUrl,
        username: env.keycloakAdminUsername,
        password: env.keycloakAdminPassword,
        timeoutMs: 10_000,
      });
      const [user] = await bootstrap.users.find({
        realm: 'master',
        username: env.keycloakAdminUsername,
        exact: true,
      });
      const credentials = await bootstrap.users.getCredentials({ realm: 'master', id: user!.id! });
      expect(credentials.map((c) => c.type)).toEqual(['password']);
    });

    it("refuses the gateway's service-account user with 409 and leaves it unchanged", async () => {
      const admin = await keycloakAdmin();
      const username = 'service-account-realmgate-gateway';
      const [before] = await admin.users.find({ realm: 'master', username, exact: true });
      expect(before?.id).toBeDefined();
      const rolesBefore = await admin.users.listRoleMappings({ realm: 'master', id: before!.id! });
      await expect(
        service.createUser('master', { username, password: 'taken-over-password' }),
      ).rejects.toMatchObject({ status: 409, result: '409-00001' });
      const [after] = await admin.users.find({ realm: 'master', username, exact: true });
      expect(after).toEqual(before);
      expect(await admin.users.getCredentials({ realm: 'master', id: before!.id! })).toEqual([]);
      expect(await admin.users.listRoleMappings({ realm: 'master', id: before!.id! })).toEqual(
        rolesBefore,
      );
    });

    it('reports the username as Keycloak stores it (lowercase)', async () => {
      const org = await organizationWith();
      const username = uniqueId('Mixed-');
      const created = await service.createUser(org, { username, password: 'pw' });
      expect(created.username).toBe(username.toLowerCase());
    });

    it('creates a master-realm user', async () => {
      const user = { realm: 'master', username: uniqueId('admin-'), password: 'pw-admin' };
      const created = await service.createUser('master', user);
      expect(created).toMatchObject({ realm: 'master', username: user.username, workspaces: [] });
      expect((await login(user)).status).toBe(200);
    });

    it('requires a valid totp from a user created with a base32 secret', async () => {
      const org = await organizationWith();
      const secret = authenticator.generateSecret(20);
      expect(secret).toMatch(/^[A-Z2-7]{32}$/);
      const user = { realm: org, username: uniqueId('otp-'), password: 'pw-otp' };
      const created = await service.createUser(org, { ...user, otpSecret: secret });
      expect((await login(user)).status).toBe(401);
      expect((await login(user, '000000')).status).toBe(401);
      // Two failures within a second lock the user for a minute (brute-force detection's quick
      // login check, realm-export/): forget them, this test is about the second factor.
      await (await keycloakAdmin()).attackDetection.del({ realm: org, id: created.id });
      const ok = await login(user, authenticator.generate(secret));
      expect(ok.status).toBe(200);
      expect(typeof ok.json.refresh_token).toBe('string');
    });

    it('ensureUser (demo seed and tests only) replaces the OTP secret of an existing user', async () => {
      const org = await organizationWith();
      const user = { realm: org, username: uniqueId('otp-'), password: 'pw-otp' };
      const oldSecret = authenticator.generateSecret(20);
      const admin = await keycloakAdmin();
      await ensureUser(admin, { ...user, otpSecretBase32: oldSecret });
      const newSecret = authenticator.generateSecret(20);
      const id = await ensureUser(admin, { ...user, otpSecretBase32: newSecret });
      const credentials = await admin.users.getCredentials({ realm: org, id });
      expect(credentials.filter((c) => c.type === 'otp')).toHaveLength(1);
      const oldCode = authenticator.generate(oldSecret);
      const newCode = authenticator.generate(newSecret);
      if (oldCode !== newCode) expect((await login(user, oldCode)).status).toBe(401);
      expect((await login(user, newCode)).status).toBe(200);
    });

    it.each([
      ['a short OTP secret', { otpSecret: 'JBSWY3DPEHPK3PXP' }],
      ['a non-base32 OTP secret', { otpSecret: 'not base32 at all 0189!!!!!!!' }],
      ['an empty password', { password: '' }],
      ['a password over 1024 characters', { password: 'x'.repeat(1025) }],
      ['an empty username', { username: '' }],
      ['a username with a newline', { username: 'a\nb' }],
      ['a username Keycloak refuses', { username: 'has space' }],
      ['a NUL in the username', { username: 'a\u0000b' }],
      ['a NUL in the password', { password: 'pw\u0000x' }],
      ['a control character in the password', { password: 'pw\u001bx' }],
      ['a malformed workspace id', { workspaces: ['ws\u0000'] }],
    ])('answers 400-00002 for %s', async (_name, override) => {
      const org = await organizationWith();
      const input = { username: uniqueId('user-'), password: 'pw', ...override };
      await expect(service.createUser(org, input)).rejects.toMatchObject({
        status: 400,
        result: '400-00002',
      });
    });

    it('answers 404 for an unknown organization or workspace, 400 for master workspaces', async () => {
      const org = await organizationWith('ws1');
      const input = { username: uniqueId('user-'), password: 'pw' };
      await expect(service.createUser(uniqueId('org-'), input)).rejects.toMatchObject({
        result: '404-00001',
      });
      await expect(
        service.createUser(org, { ...input, workspaces: ['ws1', 'nope'] }),
      ).rejects.toMatchObject({ result: '404-00002' });
      await expect(
        service.createUser('master', { ...input, workspaces: ['ws1'] }),
      ).rejects.toMatchObject({ result: '400-00002' });
    });
  });

  describe('operations', () => {
    it('adds an operation to a workspace', async () => {
      const org = await organizationWith('ws1');
      const operation = await service.addOperation(
        org,
        'ws1',
        {
          operation_name: 'Patch night',
          scheduled_date_for_execution: '2030-01-02T03:04:05.678+09:00',
          environment: 'prod',
          remarks: 'monthly',
        },
        'alice',
      );
      expect(operation).toEqual({
        parameter: {
          operation_id: expect.any(String) as string,
          operation_name: 'Patch night',
          scheduled_date_for_execution: '2030-01-01T18:04:05.678Z',
          last_run_date: null,
          environment: 'prod',
          remarks: 'monthly',
          discard: false,
          last_update_date_time: expect.any(String) as string,
          last_updated_user: 'alice',
        },
        file: {},
      });
      expect(await createOperationsRepo(db).listByWorkspace(org, 'ws1')).toEqual([operation]);
    });

    it('answers 404-00001 / 404-00002 for an unknown organization / workspace', async () => {
      const org = await organizationWith('ws1');
      const input = { operation_name: 'x' };
      await expect(service.addOperation(uniqueId('org-'), 'ws1', input)).rejects.toMatchObject({
        result: '404-00001',
      });
      await expect(service.addOperation(org, 'ws2', input)).rejects.toMatchObject({
        result: '404-00002',
      });
    });
  });

  describe('malformed path ids', () => {
    const badOrganizations = ['a\u0000b', 'Upper', 'caf\u00e9', 'a'.repeat(37), 'a b', 'platform'];
    it.each(badOrganizations)('answers 404-00001 for organization %j', async (org) => {
      const notFound = { status: 404, result: '404-00001' };
      await expect(service.createWorkspace(org, { id: 'ws', name: 'ws' })).rejects.toMatchObject(
        notFound,
      );
      await expect(
        service.createUser(org, { username: uniqueId('user-'), password: 'pw' }),
      ).rejects.toMatchObject(notFound);
      await expect(service.addOperation(org, 'ws', { operation_name: 'x' })).rejects.toMatchObject(
        notFound,
      );
      await expect(service.getTokenLifetimes(org)).rejects.toMatchObject(notFound);
    });

    it.each(['ws\u0000', '-ws', 'w\u00e9', 'w'.repeat(37), 'w s', '..'])(
      'answers 404-00002 for workspace %j',
      async (ws) => {
        const org = await organizationWith('ws1');
        await expect(service.addOperation(org, ws, { operation_name: 'x' })).rejects.toMatchObject({
          status: 404,
          result: '404-00002',
        });
      },
    );
  });

  describe('token lifetimes', () => {
    it('reads the template defaults of an organization', async () => {
      const org = await organizationWith();
      expect(await service.getTokenLifetimes(org)).toEqual({
        access_token_lifespan: DAY,
        client_session_idle_timeout: DAY,
        client_session_max_lifespan: DAY,
        offline_session_idle_timeout: YEAR,
        offline_session_max_lifespan: YEAR,
        offline_session_max_lifespan_enabled: true,
        dpop_bound_access_tokens: false,
      });
    });

    it('sets them, raising the realm SSO limits for longer client sessions', async () => {
      const org = await organizationWith();
      const wanted = {
        access_token_lifespan: 3600,
        client_session_idle_timeout: 2 * DAY,
        client_session_max_lifespan: 3 * DAY,
        offline_session_idle_timeout: 30 * DAY,
        offline_session_max_lifespan: 60 * DAY,
        offline_session_max_lifespan_enabled: true,
        dpop_bound_access_tokens: false,
      };
      expect(await service.setTokenLifetimes(org, wanted)).toEqual(wanted);
      expect(await service.getTokenLifetimes(org)).toEqual(wanted);
      const realm = await (await keycloakAdmin()).realms.findOne({ realm: org });
      expect(realm).toMatchObject({
        ssoSessionIdleTimeout: 2 * DAY,
        ssoSessionMaxLifespan: 3 * DAY,
      });

      const user = { realm: org, username: uniqueId('user-'), password: 'pw' };
      await service.createUser(org, user);
      const { json } = await login(user);
      expectAnswerSeconds(json.expires_in, 3600);
      expectAnswerSeconds(json.refresh_expires_in, 30 * DAY);
    });

    it('changes only what the patch names', async () => {
      const org = await organizationWith();
      const after = await service.setTokenLifetimes(org, {
        offline_session_max_lifespan_enabled: false,
      });
      expect(after).toMatchObject({
        access_token_lifespan: DAY,
        offline_session_idle_timeout: YEAR,
        offline_session_max_lifespan_enabled: false,
      });
    });

    it('reads the master realm and writes back the same values', async () => {
      // Other suites log into master concurrently: change nothing there.
      const current = await service.getTokenLifetimes('master');
      expect(current).toMatchObject({
        access_token_lifespan: DAY,
        offline_session_idle_timeout: YEAR,
      });
      expect(await service.setTokenLifetimes('master', current)).toEqual(current);
    });

    it.each([
      { access_token_lifespan: 0 },
      { access_token_lifespan: -5 },
      { access_token_lifespan: 1.5 },
      { access_token_lifespan: 10 * YEAR + 1 },
      { offline_session_max_lifespan_enabled: 'yes' },
      { dpop_bound_access_tokens: 'true' },
      { refresh_token_lifespan: 60 },
    ])('refuses %j with 400-00002', async (patch) => {
      await expect(
        service.setTokenLifetimes('master', patch as unknown as TokenLifetimesPatch),
      ).rejects.toMatchObject({ result: '400-00002' });
    });

    it('answers 404-00001 for an unknown organization', async () => {
      await expect(service.getTokenLifetimes(uniqueId('org-'))).rejects.toMatchObject({
        result: '404-00001',
      });
    });
  });
});
