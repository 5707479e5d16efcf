import { authenticator } from 'otplib';
import { beforeAll, describe, expect, it } from 'vitest';
import { loginAsBootstrapAdmin } from '../../src/keycloak/admin-client.ts';
import { GATEWAY_AUDIENCE_MAPPER } from '../../src/platform/realm-admin/gateway-audience.ts';
import { renderOrganizationRealm } from '../../src/platform/realm-admin/provisioning.ts';
import { AUDIT_READER_ROLE, WORKSPACE_LIST_ROLES } from '../../src/tenancy/identifiers.ts';
import {
  claimsOf,
  createUser,
  keycloakAdmin,
  userIdOf,
  passwordGrantBody,
  postToken,
  testBackchannelUrl,
  uniqueId,
  type TestUser,
} from '../helpers/keycloak.ts';
import { expectDocumentedAnswer, expectDocumentedFailure } from '../helpers/documented-answer.ts';
import { testEnv } from '../helpers/test-env.ts';

const OTP = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';

interface Answer {
  status: number;
  body: { data: unknown; message: string; result: string; ts: string };
}

function basicOf(user: TestUser): string {
  return `Basic ${Buffer.from(`${user.username}:${user.password}`).toString('base64')}`;
}

/** Calls `/api/platform<path>` on the public listener. */
async function call(
  method: string,
  path: string,
  options: { as?: TestUser; body?: unknown; rawBody?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.as) headers.authorization = basicOf(options.as);
  const res = await fetch(`${testEnv().publicUrl}/api/platform${path}`, {
    method,
    headers,
    body:
      options.rawBody ?? (options.body === undefined ? undefined : JSON.stringify(options.body)),
  });
  return { status: res.status, body: (await res.json()) as Answer['body'] };
}

function expectSuccess(answer: Answer): void {
  expect(answer.status).toBe(200);
  expect(answer.body).toMatchObject({ message: 'SUCCESS', result: '000-00000' });
  expect(answer.body.ts).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
}

function expectFailure(answer: Answer, status: number, result: string): void {
  expect(answer.status).toBe(status);
  expect(answer.body).toMatchObject({ data: null, result });
}

describe('provisioning API (/api/platform)', () => {
  let admin: TestUser;
  let org: string;

  beforeAll(async () => {
    admin = await createUser('master');
    org = uniqueId('org-');
    expectSuccess(
      await call('POST', '/organizations', { as: admin, body: { id: org, name: 'API org' } }),
    );
    expectSuccess(
      await call('POST', `/organizations/${org}/workspaces`, {
        as: admin,
        body: { id: 'ws1', name: 'Workspace 1', environments: ['prod'] },
      }),
    );
  });

  it('creates an organization, and answers the same record on a repeat', async () => {
    const id = uniqueId('org-');
    const first = await call('POST', '/organizations', { as: admin, body: { id, name: 'N' } });
    expectSuccess(first);
    expect(first.body.data).toMatchObject({ id, name: 'N', enabled: true });
    expectDocumentedAnswer('createOrganization', first.body);
    // Its clients of the gateway announce ended sessions to the back-channel logout endpoint.
    const clients = await (await keycloakAdmin()).clients.find({ realm: id });
    for (const clientId of [`_${id}-api`, 'realmgate-gateway']) {
      expect(clients.find((client) => client.clientId === clientId)?.attributes).toMatchObject({
        'backchannel.logout.url': testBackchannelUrl(),
        'backchannel.logout.session.required': 'true',
      });
    }
    const again = await call('POST', '/organizations', { as: admin, body: { id, name: 'N' } });
    expect(again.body.data).toEqual(first.body.data);
  });

  it('answers every one of several creates of the same organization at once (replicas racing)', async () => {
    // Keycloak refuses the steps that lose the race (the realm with 400 "Database operation
    // failed", not 409): each call must still find the organization made and answer it, as a
    // second create one after the other does.
    const id = uniqueId('org-');
    const answers = await Promise.all(
      [0, 1, 2].map(() =>
        call('POST', '/organizations', { as: admin, body: { id, name: 'Race' } }),
      ),
    );
    for (const answer of answers) expectSuccess(answer);
    expect(new Set(answers.map((answer) => JSON.stringify(answer.body.data))).size).toBe(1);
    expect(answers[0]?.body.data).toMatchObject({ id, name: 'Race', enabled: true });
    const kc = await keycloakAdmin();
    const roles = (await kc.roles.find({ realm: id })).map((role) => role.name);
    expect(roles).toEqual(expect.arrayContaining([AUDIT_READER_ROLE, ...WORKSPACE_LIST_ROLES]));
    const basic = (await kc.clientScopes.find({ realm: id })).find((s) => s.name === 'basic');
    expect(basic?.protocolMappers?.map((mapper) => mapper.name)).toContain(GATEWAY_AUDIENCE_MAPPER);
  });

  it("completes a repeat whose first call made the realm only: the organization's roles too", async () => {
    // The first call's realm creation outlived its timeout (504): Keycloak made the realm, and
    // nothing after it was done. The repeat the documentation asks for must finish the job.
    const id = uniqueId('org-');
    const keycloak = await keycloakAdmin();
    await keycloak.realms.create(
      await renderOrganizationRealm({
        organizationId: id,
        organizationName: 'Half made',
        gatewayClientSecret: testEnv().gatewayClientSecret,
      }),
    );
    expectSuccess(
      await call('POST', '/organizations', { as: admin, body: { id, name: 'Half made' } }),
    );
    for (const name of [AUDIT_READER_ROLE, ...WORKSPACE_LIST_ROLES]) {
      expect((await keycloak.roles.findOneByName({ realm: id, name }))?.name).toBe(name);
    }
  });

  it("makes the organization's manager roles: a holder of either sees every workspace", async () => {
    // An administrator makes a user an organization manager in Keycloak by giving it one of the
    // realm roles the gateway made with the organization; no workspace role is needed.
    const keycloak = await keycloakAdmin();
    for (const name of WORKSPACE_LIST_ROLES) {
      const role = await keycloak.roles.findOneByName({ realm: org, name });
      expect(role?.name).toBe(name);
      const user = await createUser(org);
      await keycloak.users.addRealmRoleMappings({
        realm: org,
        id: await userIdOf(user),
        roles: [{ id: role!.id!, name }],
      });
      const res = await fetch(`${testEnv().publicUrl}/api/${org}/platform/workspaces`, {
        headers: { authorization: basicOf(user) },
      });
      expect(res.status).toBe(200);
      const { data } = (await res.json()) as { data: Array<{ id: string }> };
      expect(data.map((workspace) => workspace.id)).toEqual(['ws1']);
    }
  });

  it('records the calling administrator as creator of a workspace', async () => {
    const answer = await call('POST', `/organizations/${org}/workspaces`, {
      as: admin,
      body: { id: 'ws2', name: 'Workspace 2', description: 'second' },
    });
    expectSuccess(answer);
    expect(answer.body.data).toMatchObject({
      id: 'ws2',
      name: 'Workspace 2',
      informations: { description: 'second', environments: [] },
      create_user: admin.username,
    });
    expectDocumentedAnswer('createWorkspace', answer.body);
  });

  it('creates an organization user who can then log in, without echoing secrets', async () => {
    const user = { realm: org, username: uniqueId('user-'), password: 'pw-api-user' };
    const answer = await call('POST', `/organizations/${org}/users`, {
      as: admin,
      body: { username: user.username, password: user.password, workspaces: ['ws1'] },
    });
    expectSuccess(answer);
    expect(answer.body.data).toEqual({
      id: expect.any(String) as string,
      username: user.username,
      realm: org,
      workspaces: ['ws1'],
    });
    expectDocumentedAnswer('createOrganizationUser', answer.body);
    const token = await postToken(`${testEnv().publicUrl}/auth`, org, passwordGrantBody(user));
    expect(token.status).toBe(200);
  });

  it('creates a two-factor administrator from a base32 secret', async () => {
    const secret = authenticator.generateSecret(20);
    const user = { realm: 'master', username: uniqueId('admin-'), password: 'pw-api-admin' };
    const answer = await call('POST', '/users', {
      as: admin,
      body: { username: user.username, password: user.password, otp_secret: secret },
    });
    expectSuccess(answer);
    expect(Object.keys(answer.body.data as object).sort()).toEqual([
      'id',
      'realm',
      'username',
      'workspaces',
    ]);
    expectDocumentedAnswer('createMasterUser', answer.body);
    expect(JSON.stringify(answer.body)).not.toContain(secret);
    const gateway = `${testEnv().publicUrl}/auth`;
    expect((await postToken(gateway, 'master', passwordGrantBody(user))).status).toBe(401);
    const totp = `&totp=${authenticator.generate(secret)}`;
    expect((await postToken(gateway, 'master', passwordGrantBody(user, totp))).status).toBe(200);
  });

  it('adds an operation to a workspace', async () => {
    const answer = await call('POST', `/organizations/${org}/workspaces/ws1/operations`, {
      as: admin,
      body: { operation_name: 'Backup', scheduled_date_for_execution: '2030-05-06T07:08:09Z' },
    });
    expectSuccess(answer);
    expect(answer.body.data).toMatchObject({
      parameter: {
        operation_name: 'Backup',
        scheduled_date_for_execution: '2030-05-06T07:08:09.000Z',
        environment: null,
        last_updated_user: admin.username,
      },
      file: {},
    });
    expectDocumentedAnswer('createOperation', answer.body);
  });

  it('stores the edge dates it accepts and lists them back as the same instants', async () => {
    const sent: Array<[string, string]> = [
      ['0001-01-01T00:00:00Z', '0001-01-01T00:00:00.000Z'],
      ['0001-01-01T00:00:00-15:59', '0001-01-01T15:59:00.000Z'],
      ['1582-10-10T00:00:00Z', '1582-10-10T00:00:00.000Z'],
      ['2024-02-29T12:00:00.5+09:00', '2024-02-29T03:00:00.500Z'],
      ['9999-12-31T23:59:59.999Z', '9999-12-31T23:59:59.999Z'],
      ['9999-12-31T23:59:59.999+15:59', '9999-12-31T08:00:59.999Z'],
    ];
    const ws = 'ws-dates';
    expectSuccess(
      await call('POST', `/organizations/${org}/workspaces`, {
        as: admin,
        body: { id: ws, name: 'Edge dates' },
      }),
    );
    for (const [index, [date, stored]] of sent.entries()) {
      const answer = await call('POST', `/organizations/${org}/workspaces/${ws}/operations`, {
        as: admin,
        body: { operation_name: `edge-${index}`, scheduled_date_for_execution: date },
      });
      expectSuccess(answer);
      expect(answer.body.data).toMatchObject({
        parameter: { scheduled_date_for_execution: stored },
      });
    }
    const reader = await createUser(org, { workspaceRoles: [ws] });
    const listed = await fetch(
      `${testEnv().publicUrl}/api/${org}/workspaces/${ws}/ita/menu/operation_list/filter/`,
      { headers: { authorization: basicOf(reader) } },
    );
    expect(listed.status).toBe(200);
    const { data } = (await listed.json()) as {
      data: Array<{ parameter: { operation_name: string; scheduled_date_for_execution: string } }>;
    };
    expect(
      data.map(({ parameter }) => [
        parameter.operation_name,
        parameter.scheduled_date_for_execution,
      ]),
    ).toEqual(sent.map(([, stored], index) => [`edge-${index}`, stored]));
  });

  it('reads and changes the token lifetimes of an organization', async () => {
    const before = await call('GET', `/organizations/${org}/token-lifetimes`, { as: admin });
    expectSuccess(before);
    expect(before.body.data).toMatchObject({ access_token_lifespan: 86400 });
    const patched = await call('PATCH', `/organizations/${org}/token-lifetimes`, {
      as: admin,
      body: { access_token_lifespan: 7200, offline_session_idle_timeout: 86400 * 30 },
    });
    expectSuccess(patched);
    expect(patched.body.data).toEqual({
      access_token_lifespan: 7200,
      client_session_idle_timeout: 86400,
      client_session_max_lifespan: 86400,
      offline_session_idle_timeout: 86400 * 30,
      offline_session_max_lifespan: 86400 * 365,
      offline_session_max_lifespan_enabled: true,
      dpop_bound_access_tokens: false,
    });
  });

  it("reads the master realm's token lifetimes (and writes them back unchanged)", async () => {
    const current = await call('GET', '/token-lifetimes', { as: admin });
    expectSuccess(current);
    expect(current.body.data).toMatchObject({ access_token_lifespan: 86400 });
    const same = await call('PATCH', '/token-lifetimes', { as: admin, body: current.body.data });
    expect(same.body.data).toEqual(current.body.data);
  });

  describe('refuses bad bodies with 400-00002', () => {
    const cases: Array<[string, string, string, () => { body?: unknown; rawBody?: string }]> = [
      ['missing name', 'POST', '/organizations', () => ({ body: { id: uniqueId('org-') } })],
      ['invalid id', 'POST', '/organizations', () => ({ body: { id: 'Bad Id', name: 'x' } })],
      ['unknown key', 'POST', '/organizations', () => ({ body: { id: 'a', name: 'x', x: 1 } })],
      ['not JSON', 'POST', '/organizations', () => ({ rawBody: '{"id":' })],
      ['an array', 'POST', '/organizations', () => ({ body: [] })],
      [
        'workspace id',
        'POST',
        `/organizations/ORG/workspaces`,
        () => ({ body: { id: '-', name: 'x' } }),
      ],
      [
        'a name shown reversed (U+202E)',
        'POST',
        '/organizations',
        () => ({ body: { id: uniqueId('org-'), name: '\u202Eorg-evil' } }),
      ],
      [
        'a user name shown reordered (U+2067)',
        'POST',
        '/users',
        () => ({ body: { username: `\u2067${uniqueId('u-')}`, password: 'p' } }),
      ],
      ['no password', 'POST', '/users', () => ({ body: { username: uniqueId('u-') } })],
      [
        'short otp',
        'POST',
        '/users',
        () => ({ body: { username: 'abc', password: 'p', otp_secret: 'AAAA' } }),
      ],
      [
        'workspaces type',
        'POST',
        `/organizations/ORG/users`,
        () => ({ body: { username: 'abc', password: 'p', workspaces: 'ws1' } }),
      ],
      [
        'bad date',
        'POST',
        `/organizations/ORG/workspaces/ws1/operations`,
        () => ({ body: { operation_name: 'x', scheduled_date_for_execution: 'tomorrow' } }),
      ],
      [
        // PostgreSQL has no year 0 (1 BC comes right before 1 AD) and no offset beyond 15:59.
        'date in year 0000',
        'POST',
        `/organizations/ORG/workspaces/ws1/operations`,
        () => ({
          body: { operation_name: 'x', scheduled_date_for_execution: '0000-06-01T00:00:00Z' },
        }),
      ],
      [
        'date offset beyond 15:59',
        'POST',
        `/organizations/ORG/workspaces/ws1/operations`,
        () => ({
          body: { operation_name: 'x', scheduled_date_for_execution: '2026-06-01T00:00:00+23:59' },
        }),
      ],
      ...(
        [
          // Its instant, 0000-12-31T08:01Z, is in year 0: stored as 1 BC, answered as year 0000.
          ['date in year 0 by its offset', '0001-01-01T00:00:00+15:59'],
          // PostgreSQL keeps microseconds and rounds: this one would be stored in year 10000.
          ['date rounded into year 10000', '9999-12-31T23:59:59.9999999Z'],
          // The answer shows milliseconds: finer would not come back as sent.
          ['date finer than milliseconds', '2026-06-01T00:00:00.1234567891Z'],
          // PostgreSQL refuses a time text over 128 characters.
          ['date with 200 fraction digits', `2026-06-01T00:00:00.${'1'.repeat(200)}Z`],
          ['date offset +24:00', '2026-06-01T00:00:00+24:00'],
          ['date offset -24:00', '2026-06-01T00:00:00-24:00'],
          ['date in year 10000', '10000-01-01T00:00:00Z'],
          ['date on a leap second', '2016-12-31T23:59:60Z'],
          ['date on February 30', '2026-02-30T00:00:00Z'],
          ['date without offset', '2026-06-01T00:00:00'],
          ['date in Arabic-Indic digits', '\u0662\u0660\u0662\u0666-06-01T00:00:00Z'],
          ['date of 64 KB', `2026-06-01T00:00:00.${'1'.repeat(60_000)}Z`],
        ] as const
      ).map(
        ([name, date]) =>
          [
            name,
            'POST',
            `/organizations/ORG/workspaces/ws1/operations`,
            () => ({ body: { operation_name: 'x', scheduled_date_for_execution: date } }),
          ] as [string, string, string, () => { body?: unknown; rawBody?: string }],
      ),
      [
        'zero lifetime',
        'PATCH',
        '/token-lifetimes',
        () => ({ body: { access_token_lifespan: 0 } }),
      ],
      [
        'string lifetime',
        'PATCH',
        `/organizations/ORG/token-lifetimes`,
        () => ({ body: { access_token_lifespan: '60' } }),
      ],
      [
        'unknown lifetime',
        'PATCH',
        '/token-lifetimes',
        () => ({ body: { refresh_token_lifespan: 60 } }),
      ],
    ];
    it.each(cases)('%s', async (_name, method, path, request) => {
      const answer = await call(method, path.replace('ORG', org), { as: admin, ...request() });
      expectFailure(answer, 400, '400-00002');
      expect(answer.body.message.length).toBeGreaterThan(0);
    });
  });

  describe('never takes over an existing account (409-00001)', () => {
    function expectUserExists(answer: Answer): void {
      expectFailure(answer, 409, '409-00001');
      expect(answer.body.message).toBe('User already exists.');
    }

    it('refuses an existing organization user and leaves password and roles as they were', async () => {
      const user = await createUser(org, { workspaceRoles: ['ws1'] });
      const answer = await call('POST', `/organizations/${org}/users`, {
        as: admin,
        body: { username: user.username, password: 'new-password-1', workspaces: ['ws2'] },
      });
      expectUserExists(answer);
      const gateway = `${testEnv().publicUrl}/auth`;
      const stolen = { ...user, password: 'new-password-1' };
      expect((await postToken(gateway, org, passwordGrantBody(stolen))).status).toBe(401);
      const token = await postToken(gateway, org, passwordGrantBody(user));
      expect(token.status).toBe(200);
      expect(claimsOf(token.json.access_token)).toMatchObject({
        resource_access: { [`${org}-workspaces`]: { roles: ['ws1'] } },
      });
    });

    it('refuses a username differing from an existing one only in case', async () => {
      const user = await createUser(org);
      const answer = await call('POST', `/organizations/${org}/users`, {
        as: admin,
        body: { username: user.username.toUpperCase(), password: 'new-password-2' },
      });
      expectUserExists(answer);
      const token = await postToken(`${testEnv().publicUrl}/auth`, org, passwordGrantBody(user));
      expect(token.status).toBe(200);
    });

    it("refuses Keycloak's bootstrap administrator, who can still log in", async () => {
      const env = testEnv();
      const answer = await call('POST', '/users', {
        as: admin,
        body: { username: env.keycloakAdminUsername, password: 'taken-over-password' },
      });
      expectUserExists(answer);
      const bootstrap = await loginAsBootstrapAdmin({
        keycloakUrl: env.keycloakUrl,
        username: env.keycloakAdminUsername,
        password: env.keycloakAdminPassword,
        timeoutMs: 10_000,
      });
      expect(typeof bootstrap.accessToken).toBe('string');
    });

    it("refuses the gateway's service-account user and leaves it unchanged", async () => {
      const kc = await keycloakAdmin();
      const username = 'service-account-realmgate-gateway';
      const [before] = await kc.users.find({ realm: 'master', username, exact: true });
      const answer = await call('POST', '/users', {
        as: admin,
        body: { username, password: 'taken-over-password' },
      });
      expectUserExists(answer);
      const [after] = await kc.users.find({ realm: 'master', username, exact: true });
      expect(after).toEqual(before);
      expect(await kc.users.getCredentials({ realm: 'master', id: before!.id! })).toEqual([]);
    });
  });

  describe('refuses unstorable strings in every body field with 400-00002', () => {
    type Endpoint = { path: string; body: () => Record<string, unknown> };
    const endpoints: Record<string, Endpoint> = {
      organization: {
        path: '/organizations',
        body: () => ({ id: uniqueId('org-'), name: 'Org' }),
      },
      workspace: {
        path: '/organizations/ORG/workspaces',
        body: () => ({ id: uniqueId('ws-'), name: 'Ws', description: 'd', environments: ['e'] }),
      },
      administrator: {
        path: '/users',
        body: () => ({ username: uniqueId('admin-'), password: 'pw-x', otp_secret: OTP }),
      },
      'organization user': {
        path: '/organizations/ORG/users',
        body: () => ({
          username: uniqueId('user-'),
          password: 'pw-x',
          otp_secret: OTP,
          workspaces: ['ws1'],
        }),
      },
      operation: {
        path: '/organizations/ORG/workspaces/ws1/operations',
        body: () => ({ operation_name: 'op', environment: 'prod', remarks: 'r' }),
      },
    };
    // [endpoint, field, maximum length, is a list]
    const fields: Array<[string, string, number, boolean]> = [
      ['organization', 'id', 36, false],
      ['organization', 'name', 255, false],
      ['workspace', 'id', 36, false],
      ['workspace', 'name', 255, false],
      ['workspace', 'description', 4000, false],
      ['workspace', 'environments', 255, true],
      ['administrator', 'username', 255, false],
      ['administrator', 'password', 1024, false],
      ['administrator', 'otp_secret', 512, false],
      ['organization user', 'username', 255, false],
      ['organization user', 'password', 1024, false],
      ['organization user', 'otp_secret', 512, false],
      ['organization user', 'workspaces', 36, true],
      ['operation', 'operation_name', 255, false],
      ['operation', 'environment', 255, false],
      ['operation', 'remarks', 4000, false],
      ['operation', 'scheduled_date_for_execution', 64, false],
    ];
    const variants: Array<[string, (max: number) => string]> = [
      ['a NUL', () => 'ab\u0000cd'],
      ['an escape character', () => 'ab\u001bcd'],
      ['a DEL', () => 'ab\u007fcd'],
      ['a C1 control', () => 'ab\u0085cd'],
      ['a lone surrogate', () => 'ab\ud800cd'],
      ['one character too many', (max) => 'a'.repeat(max + 1)],
    ];
    const cases = fields.flatMap(([endpoint, field, max, list]) =>
      variants.map(
        ([variant, value]) =>
          [`${endpoint} ${field}: ${variant}`, endpoint, field, list, value(max)] as const,
      ),
    );
    it.each(cases)('%s', async (_name, endpoint, field, list, value) => {
      const { path, body } = endpoints[endpoint]!;
      const answer = await call('POST', path.replace('ORG', org), {
        as: admin,
        body: { ...body(), [field]: list ? [value] : value },
      });
      expectFailure(answer, 400, '400-00002');
      expect(answer.body.message).toContain(field);
    });

    it('keeps tabs and line breaks in free text', async () => {
      const text = 'line 1\r\nline 2\ttabbed\n';
      const workspace = await call('POST', `/organizations/${org}/workspaces`, {
        as: admin,
        body: { id: uniqueId('ws-'), name: 'Free text', description: text },
      });
      expectSuccess(workspace);
      expect(workspace.body.data).toMatchObject({ informations: { description: text } });
      const operation = await call('POST', `/organizations/${org}/workspaces/ws1/operations`, {
        as: admin,
        body: { operation_name: 'Free text', remarks: text },
      });
      expectSuccess(operation);
      expect(operation.body.data).toMatchObject({ parameter: { remarks: text } });
    });

    it('refuses line breaks in one-line fields', async () => {
      const answer = await call('POST', `/organizations/${org}/workspaces/ws1/operations`, {
        as: admin,
        body: { operation_name: 'two\nlines' },
      });
      expectFailure(answer, 400, '400-00002');
    });
  });

  describe('answers 404 for path ids outside their alphabet', () => {
    // Percent-encoded as a client would send them; control bytes are the edge's (400-00001).
    const organizations = [
      'Upper',
      'caf%C3%A9',
      'a'.repeat(37),
      'a%20b',
      '%E2%9C%93',
      '%F0%9F%98%80',
      'master',
      'platform',
      '1org',
      'a.b',
      'a~b',
      "a'b",
      'a%2Bb',
    ];
    const organizationRoutes: Array<[string, (o: string) => string, unknown]> = [
      ['POST', (o) => `/organizations/${o}/workspaces`, { id: 'ws', name: 'x' }],
      ['POST', (o) => `/organizations/${o}/users`, { username: 'abc', password: 'pw-x' }],
      ['POST', (o) => `/organizations/${o}/workspaces/ws1/operations`, { operation_name: 'x' }],
      ['GET', (o) => `/organizations/${o}/token-lifetimes`, undefined],
      ['PATCH', (o) => `/organizations/${o}/token-lifetimes`, { access_token_lifespan: 60 }],
    ];
    const cases = organizations.flatMap((id) =>
      organizationRoutes.map(([method, path, body]) => [method, path(id), body] as const),
    );
    it.each(cases)('%s %s -> 404-00001', async (method, path, body) => {
      expectFailure(await call(method, path, { as: admin, body }), 404, '404-00001');
    });

    const workspaces = [
      '-ws',
      '_ws',
      'w%C3%A9',
      'w'.repeat(37),
      'w%20s',
      '%E2%9C%93',
      'w.s',
      'w~s',
    ];
    it.each(workspaces)('workspace %s -> 404-00002', async (ws) => {
      const answer = await call('POST', `/organizations/${org}/workspaces/${ws}/operations`, {
        as: admin,
        body: { operation_name: 'x' },
      });
      expectFailure(answer, 404, '404-00002');
    });
  });

  it('answers 404-00001 for an unknown organization and 404-00002 for an unknown workspace', async () => {
    const missingOrg = uniqueId('org-');
    expectFailure(
      await call('POST', `/organizations/${missingOrg}/workspaces`, {
        as: admin,
        body: { id: 'ws1', name: 'x' },
      }),
      404,
      '404-00001',
    );
    expectFailure(
      await call('GET', `/organizations/${missingOrg}/token-lifetimes`, { as: admin }),
      404,
      '404-00001',
    );
    const unknownWorkspace = await call('POST', `/organizations/${org}/users`, {
      as: admin,
      body: { username: uniqueId('user-'), password: 'pw', workspaces: ['nope'] },
    });
    expectFailure(unknownWorkspace, 404, '404-00002');
    expectDocumentedFailure('createOrganizationUser', unknownWorkspace);
    expectFailure(
      await call('POST', `/organizations/${org}/workspaces/nope/operations`, {
        as: admin,
        body: { operation_name: 'x' },
      }),
      404,
      '404-00002',
    );
  });

  it('refuses organization users and anonymous callers with 401-00002', async () => {
    const orgUser = await createUser(org, { workspaceRoles: ['ws1'] });
    const attempts: Array<[string, string, unknown]> = [
      ['POST', '/organizations', { id: uniqueId('org-'), name: 'x' }],
      ['GET', `/organizations/${org}/token-lifetimes`, undefined],
      ['POST', `/organizations/${org}/users`, { username: uniqueId('u-'), password: 'pw' }],
    ];
    for (const [method, path, body] of attempts) {
      expectFailure(await call(method, path, { as: orgUser, body }), 401, '401-00002');
      expectFailure(await call(method, path, { body }), 401, '401-00002');
    }
  });
});
