import { authenticator } from 'otplib';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  createUser,
  passwordGrantBody,
  postToken,
  uniqueId,
  type TestUser,
} from '../helpers/keycloak.ts';
import { testEnv } from '../helpers/test-env.ts';

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
    const again = await call('POST', '/organizations', { as: admin, body: { id, name: 'N' } });
    expect(again.body.data).toEqual(first.body.data);
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
    expect(JSON.stringify(answer.body)).not.toContain(secret);
    const gateway = `${testEnv().publicUrl}/auth`;
    expect((await postToken(gateway, 'master', passwordGrantBody(user))).status).toBe(400);
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
    expectFailure(
      await call('POST', `/organizations/${org}/users`, {
        as: admin,
        body: { username: uniqueId('user-'), password: 'pw', workspaces: ['nope'] },
      }),
      404,
      '404-00002',
    );
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
