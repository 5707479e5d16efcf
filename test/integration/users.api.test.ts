import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessTokenOf, basicAuth } from '../helpers/api.ts';
import {
  claimsOf,
  createUser,
  grantRealmManagementRole,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  sessionCount,
  uniqueId,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { createLogger } from '../../src/http/logger.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { expectDocumentedAnswer } from '../helpers/documented-answer.ts';
import { testEnv } from '../helpers/test-env.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';

interface Answer {
  status: number;
  body: { data: unknown; message: string; result: string; ts: string };
}

/** Calls `<base>/api<path>` with an Authorization header. */
async function call(
  method: string,
  path: string,
  authorization: string,
  options: { body?: unknown; base?: string } = {},
): Promise<Answer> {
  const res = await fetch(`${options.base ?? testEnv().publicUrl}/api${path}`, {
    method,
    headers: { authorization, 'content-type': 'application/json' },
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  return { status: res.status, body: (await res.json()) as Answer['body'] };
}

function expectResult(answer: Answer, status: number, result: string): void {
  expect({ status: answer.status, result: answer.body.result }).toEqual({ status, result });
}

const bearer = (token: string) => `Bearer ${token}`;

/** Whether Keycloak has the user enabled (undefined: no such user). */
async function enabledInKeycloak(user: TestUser): Promise<boolean | undefined> {
  const admin = await keycloakAdmin();
  const [found] = await admin.users.find({
    realm: user.realm,
    username: user.username,
    exact: true,
  });
  return found?.enabled;
}

/** The workspace roles Keycloak holds for the user. */
async function rolesInKeycloak(user: TestUser): Promise<string[]> {
  const admin = await keycloakAdmin();
  const [client] = await admin.clients.find({
    realm: user.realm,
    clientId: `${user.realm}-workspaces`,
  });
  const roles = await admin.users.listClientRoleMappings({
    realm: user.realm,
    id: await userIdOf(user),
    clientUniqueId: client!.id!,
  });
  return roles.map((role) => role.name!).sort();
}

/**
 * A new token of `user` that the gateway serves at `path`, after a change (enable, a role
 * removed) that revoked the user's earlier tokens: Keycloak's `iat` is in seconds, and a token
 * issued in the second of a revocation counts as issued before it. Keycloak's clock moves only
 * with real time, so new tokens are asked for until one is served (the event), no fixed wait.
 */
async function tokenServed(user: TestUser, path: string): Promise<string> {
  let fresh = '';
  await expect
    .poll(
      async () => {
        fresh = await accessTokenOf(user);
        return (await call('GET', path, bearer(fresh))).status;
      },
      { ...EVENTUALLY, interval: 200 },
    )
    .toBe(200);
  return fresh;
}

describe('user lifecycle API', () => {
  let admin: TestUser;
  let asAdmin: string;
  let org: string;
  let upstream: RecordingUpstream;
  let replica: Replica;
  let replicaLog = '';
  const orgUsers = (suffix = '') => `/platform/organizations/${org}/users${suffix}`;
  const workspaceRoute = () => `/${org}/workspaces/ws1/ita/menu/operation_list/filter/`;

  beforeAll(async () => {
    admin = await createUser('master');
    asAdmin = basicAuth(admin);
    org = await createOrganization(['ws1', 'ws2']);
    upstream = await startRecordingUpstream();
    // A second replica sharing the revocations over Redis; its automation route is forwarded.
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        replicaLog += chunk.toString();
        done();
      },
    });
    replica = await startReplica(
      18950,
      {
        REDIS_URL: testEnv().redisUrl,
        REDIS_KEY_PREFIX: testEnv().redisKeyPrefix,
        AUTOMATION_UPSTREAM_URL: upstream.url,
      },
      createLogger('info', sink),
    );
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await upstream?.close();
    await closeTestDb();
  });

  describe('list and get', () => {
    const prefix = uniqueId('pg');
    let users: TestUser[];

    beforeAll(async () => {
      users = [];
      for (const name of ['c', 'a', 'b']) {
        users.push(
          await createUser(org, { username: `${prefix}-${name}`, workspaceRoles: ['ws2'] }),
        );
      }
    });

    it('pages an organization by username with first and max, workspaces included', async () => {
      const page1 = await call('GET', orgUsers(`?search=${prefix}&first=0&max=2`), asAdmin);
      expectResult(page1, 200, '000-00000');
      const data = page1.body.data as Record<string, unknown>[];
      expect(data.map((u) => u.username)).toEqual([`${prefix}-a`, `${prefix}-b`]);
      expect(data[0]).toMatchObject({ enabled: true, realm: org, workspaces: ['ws2'] });
      expect(data[0]!.id).toMatch(/^[0-9a-f-]{36}$/);
      expect(Date.parse(String(data[0]!.created_timestamp))).toBeGreaterThan(0);
      expectDocumentedAnswer('listOrganizationUsers', page1.body);
      const page2 = await call('GET', orgUsers(`?search=${prefix}&first=2&max=2`), asAdmin);
      expect((page2.body.data as { username: string }[]).map((u) => u.username)).toEqual([
        `${prefix}-c`,
      ]);
    });

    it('searches from the start of a name; `*` matches any characters, as Keycloak does', async () => {
      const middle = prefix.slice(2); // the hex after "pg": inside every name, at none's start
      const names = async (search: string) => {
        const answer = await call(
          'GET',
          orgUsers(`?search=${encodeURIComponent(search)}`),
          asAdmin,
        );
        expectResult(answer, 200, '000-00000');
        return (answer.body.data as { username: string }[]).map((u) => u.username);
      };
      expect(await names(middle)).toEqual([]);
      expect(await names(`*${middle}*`)).toEqual([`${prefix}-a`, `${prefix}-b`, `${prefix}-c`]);
      expect(await names(`${prefix}-b`)).toEqual([`${prefix}-b`]);
    });

    it('lists master users without workspaces', async () => {
      const answer = await call('GET', `/platform/users?search=${admin.username}`, asAdmin);
      expectResult(answer, 200, '000-00000');
      const [record] = answer.body.data as Record<string, unknown>[];
      expect(record).toMatchObject({ username: admin.username, realm: 'master', enabled: true });
      expect(record).not.toHaveProperty('workspaces');
      expectDocumentedAnswer('listMasterUsers', answer.body);
    });

    it.each([
      'max=0',
      'max=1001',
      'first=-1',
      'first=abc',
      'max=1e2',
      'max=1&max=2',
      'search=',
      'sort=username',
    ])('refuses the query %s with 400-00002', async (query) => {
      expectResult(await call('GET', orgUsers(`?${query}`), asAdmin), 400, '400-00002');
    });

    it('gets one user by exact username, in any letter case', async () => {
      const answer = await call('GET', orgUsers(`/${prefix.toUpperCase()}-A`), asAdmin);
      expectResult(answer, 200, '000-00000');
      expect(answer.body.data).toMatchObject({ username: `${prefix}-a`, workspaces: ['ws2'] });
      expectDocumentedAnswer('getOrganizationUser', answer.body);
      // A prefix of a username is not that user.
      expectResult(await call('GET', orgUsers(`/${prefix}-`), asAdmin), 404, '404-00003');
    });

    it('answers unknown and malformed names and realms in the envelope', async () => {
      expectResult(await call('GET', orgUsers('/nobody-here'), asAdmin), 404, '404-00003');
      // Control characters in a path stop at the edge (400-00001), before any route.
      expectResult(await call('GET', orgUsers('/a%01b'), asAdmin), 400, '400-00001');
      expectResult(await call('GET', orgUsers(`/${'x'.repeat(300)}`), asAdmin), 404, '404-00003');
      const unknownOrg = await call('GET', '/platform/organizations/no-such-org/users', asAdmin);
      expectResult(unknownOrg, 404, '404-00001');
      const badOrg = await call('GET', '/platform/organizations/Bad!Org/users/x', asAdmin);
      expectResult(badOrg, 404, '404-00001');
    });
  });

  describe('disable and enable', () => {
    it('refuses the user at once, on both replicas and routes, and enable lets them back', async () => {
      const user = await createUser(org, { workspaceRoles: ['ws1'] });
      const token = await accessTokenOf(user);
      const tokenEndpoint = `${testEnv().publicUrl}/auth`;
      const offline = await postToken(tokenEndpoint, org, passwordGrantBody(user));
      expect(offline.status).toBe(200);
      const listing = `/${org}/platform/workspaces`;
      // Warm: the token is verified and the Basic login cached on both replicas.
      for (const base of [testEnv().publicUrl, replica.url]) {
        expectResult(await call('GET', listing, bearer(token), { base }), 200, '000-00000');
        expectResult(await call('GET', listing, basicAuth(user), { base }), 200, '000-00000');
      }
      expect(
        (await call('GET', workspaceRoute(), bearer(token), { base: replica.url })).status,
      ).toBe(200);

      const disabled = await call('POST', orgUsers(`/${user.username}/disable`), asAdmin);
      expectResult(disabled, 200, '000-00000');
      expect(disabled.body.data).toMatchObject({ username: user.username, enabled: false });
      expectDocumentedAnswer('disableOrganizationUser', disabled.body);

      expectResult(await call('GET', listing, bearer(token)), 401, '401-00002');
      expectResult(await call('GET', listing, basicAuth(user)), 401, '401-00002');
      expectResult(await call('GET', workspaceRoute(), bearer(token)), 401, '401-00002');
      // The other replica learns it over Redis (how soon: the HA suite's figure, test/ha/).
      await expect
        .poll(
          () =>
            Promise.all(
              [
                call('GET', listing, bearer(token), { base: replica.url }),
                call('GET', listing, basicAuth(user), { base: replica.url }),
                call('GET', workspaceRoute(), bearer(token), { base: replica.url }),
              ].map(async (answer) => (await answer).status),
            ),
          EVENTUALLY,
        )
        .toEqual([401, 401, 401]);
      expect(await enabledInKeycloak(user)).toBe(false);
      expect(await sessionCount(user)).toBe(0);
      const kc = await keycloakAdmin();
      const [apiClient] = await kc.clients.find({ realm: org, clientId: `_${org}-api` });
      const offlineSessions = await kc.users.listOfflineSessions({
        realm: org,
        id: await userIdOf(user),
        clientId: apiClient!.id!,
      });
      expect(offlineSessions).toEqual([]);

      const enabled = await call('POST', orgUsers(`/${user.username}/enable`), asAdmin);
      expect(enabled.body.data).toMatchObject({ enabled: true });
      const fresh = await tokenServed(user, listing);
      expectResult(
        await call('GET', listing, bearer(fresh), { base: replica.url }),
        200,
        '000-00000',
      );
      // The token from before the disable stays refused, and its offline session has ended.
      expectResult(await call('GET', listing, bearer(token)), 401, '401-00002');
      const refreshed = await postToken(
        tokenEndpoint,
        org,
        `client_id=_${org}-api&grant_type=refresh_token&refresh_token=${String(offline.json.refresh_token)}`,
      );
      expect(refreshed.json.error).toBe('invalid_grant');
    });
  });

  describe('delete', () => {
    it('refuses the tokens at once, deletes the user, and a repeat is 404-00003', async () => {
      const user = await createUser('master');
      const token = await accessTokenOf(user);
      expectResult(await call('GET', '/platform/organizations', bearer(token)), 200, '000-00000');
      const deleted = await call('DELETE', `/platform/users/${user.username}`, asAdmin);
      expectResult(deleted, 200, '000-00000');
      expect(deleted.body.data).toMatchObject({ username: user.username, realm: 'master' });
      expectResult(await call('GET', '/platform/organizations', bearer(token)), 401, '401-00002');
      expect(await enabledInKeycloak(user)).toBeUndefined();
      const again = await call('DELETE', `/platform/users/${user.username}`, asAdmin);
      expectResult(again, 404, '404-00003');
    });
  });

  describe('password', () => {
    it('sets a new password; the old Basic login stops at once, sessions stay', async () => {
      const user = await createUser(org);
      const token = await accessTokenOf(user);
      const listing = `/${org}/platform/workspaces`;
      expectResult(await call('GET', listing, basicAuth(user)), 200, '000-00000');
      const password = `New-${uniqueId('pw')}`;
      const changed = await call('PUT', orgUsers(`/${user.username}/password`), asAdmin, {
        body: { password },
      });
      expectResult(changed, 200, '000-00000');
      expect(JSON.stringify(changed.body)).not.toContain(password);
      expectResult(await call('GET', listing, basicAuth(user)), 401, '401-00002');
      expectResult(await call('GET', listing, basicAuth({ ...user, password })), 200, '000-00000');
      expectResult(await call('GET', listing, bearer(token)), 200, '000-00000');
    });

    it.each([{}, { password: '' }, { password: 'a\nb' }, { password: 'x', extra: 1 }, 'text'])(
      'refuses the body %j with 400-00002',
      async (body) => {
        const user = await createUser(org);
        const answer = await call('PUT', orgUsers(`/${user.username}/password`), asAdmin, {
          body,
        });
        expectResult(answer, 400, '400-00002');
      },
    );
  });

  describe('workspace roles', () => {
    it('grants and removes a role, idempotently; an old token loses the workspace at once', async () => {
      const user = await createUser(org);
      const path = orgUsers(`/${user.username}/workspaces/ws1`);
      for (let i = 0; i < 2; i++) {
        const granted = await call('PUT', path, asAdmin);
        expectResult(granted, 200, '000-00000');
        expect(granted.body.data).toMatchObject({ workspaces: ['ws1'] });
        expectDocumentedAnswer('grantWorkspaceRole', granted.body);
      }
      expect(await rolesInKeycloak(user)).toEqual(['ws1']);
      const token = await accessTokenOf(user);
      expectResult(await call('GET', workspaceRoute(), bearer(token)), 200, '000-00000');
      expect(
        (await call('GET', workspaceRoute(), bearer(token), { base: replica.url })).status,
      ).toBe(200);

      for (let i = 0; i < 2; i++) {
        const removed = await call('DELETE', path, asAdmin);
        expectResult(removed, 200, '000-00000');
        expect(removed.body.data).toMatchObject({ workspaces: [] });
      }
      expect(await rolesInKeycloak(user)).toEqual([]);
      expectResult(await call('GET', workspaceRoute(), bearer(token)), 401, '401-00002');
      await expect
        .poll(
          async () =>
            (await call('GET', workspaceRoute(), bearer(token), { base: replica.url })).status,
          EVENTUALLY,
        )
        .toBe(401);
      // A token issued after the removal works, without the workspace.
      const fresh = await tokenServed(user, `/${org}/platform/workspaces`);
      expectResult(await call('GET', workspaceRoute(), bearer(fresh)), 403, '403-00001');
    });

    it('answers 409-22001 to removing a workspace the user still holds through a group, and lists it as held', async () => {
      const user = await createUser(org);
      const id = await userIdOf(user);
      const kc = await keycloakAdmin();
      const [client] = await kc.clients.find({ realm: org, clientId: `${org}-workspaces` });
      const role = await kc.clients.findRole({ realm: org, id: client!.id!, roleName: 'ws2' });
      // A group holding the workspace's role, set in Keycloak (the gateway has no group API).
      const group = await kc.groups.create({ realm: org, name: uniqueId('holders') });
      await kc.groups.addClientRoleMappings({
        realm: org,
        id: group.id,
        clientUniqueId: client!.id!,
        roles: [{ id: role!.id!, name: 'ws2' }],
      });
      await kc.users.addToGroup({ realm: org, id, groupId: group.id });
      const path = orgUsers(`/${user.username}/workspaces/ws2`);
      expectResult(await call('PUT', path, asAdmin), 200, '000-00000');

      const refused = await call('DELETE', path, asAdmin);
      expectResult(refused, 409, '409-22001');
      // Its direct role is gone; the group's stays, and the user is listed with it, as its
      // tokens carry it.
      expect(await rolesInKeycloak(user)).toEqual([]);
      const listed = await call('GET', orgUsers(`/${user.username}`), asAdmin);
      expect(listed.body.data).toMatchObject({ workspaces: ['ws2'] });
      const token = await accessTokenOf(user);
      const access = claimsOf(token).resource_access as Record<string, { roles: string[] }>;
      expect(access[`${org}-workspaces`]!.roles).toContain('ws2');

      // Out of the group, the removal is done.
      await kc.users.delFromGroup({ realm: org, id, groupId: group.id });
      const removed = await call('DELETE', path, asAdmin);
      expectResult(removed, 200, '000-00000');
      expect(removed.body.data).toMatchObject({ workspaces: [] });
    });

    it('answers an unknown workspace 404-00002 and changes nothing', async () => {
      const user = await createUser(org);
      for (const ws of ['nows', 'bad!ws']) {
        const answer = await call('PUT', orgUsers(`/${user.username}/workspaces/${ws}`), asAdmin);
        expectResult(answer, 404, '404-00002');
      }
      expect(await rolesInKeycloak(user)).toEqual([]);
    });
  });

  describe('protected accounts', () => {
    const changes = (path: string) =>
      [
        ['POST', `${path}/disable`, undefined],
        ['POST', `${path}/enable`, undefined],
        ['PUT', `${path}/password`, { password: 'Taken-Over-1' }],
        ['DELETE', path, undefined],
      ] as const;

    async function expectProtected(paths: readonly (readonly [string, string, unknown])[]) {
      for (const [method, path, body] of paths) {
        const answer = await call(method, path, asAdmin, { body });
        expect({ path, method, result: answer.body.result, status: answer.status }).toEqual({
          path,
          method,
          result: '403-00002',
          status: 403,
        });
      }
    }

    it("refuses Keycloak's bootstrap administrator and changes nothing", async () => {
      const name = testEnv().keycloakAdminUsername;
      await expectProtected(changes(`/platform/users/${name}`));
      await expectProtected(changes(`/platform/users/${name.toUpperCase()}`));
      expect(await enabledInKeycloak({ realm: 'master', username: name, password: '' })).toBe(true);
    });

    it('refuses service accounts of an organization realm', async () => {
      const name = 'service-account-realmgate-gateway';
      await expectProtected([
        ...changes(orgUsers(`/${name}`)),
        ['PUT', orgUsers(`/${name}/workspaces/ws1`), undefined],
        ['DELETE', orgUsers(`/${name}/workspaces/ws1`), undefined],
      ]);
      const account = { realm: org, username: name, password: '' };
      expect(await enabledInKeycloak(account)).toBe(true);
    });

    it("refuses users holding Keycloak's admin roles, in master and in an organization", async () => {
      const kc = await keycloakAdmin();
      const orgAdmin = await createUser(org);
      await grantRealmManagementRole(orgAdmin, 'view-users');
      const masterAdmin = await createUser('master');
      const adminRole = await kc.roles.findOneByName({ realm: 'master', name: 'admin' });
      await kc.users.addRealmRoleMappings({
        realm: 'master',
        id: await userIdOf(masterAdmin),
        roles: [{ id: adminRole!.id!, name: adminRole!.name! }],
      });
      await expectProtected([
        ...changes(orgUsers(`/${orgAdmin.username}`)),
        ['PUT', orgUsers(`/${orgAdmin.username}/workspaces/ws1`), undefined],
        ...changes(`/platform/users/${masterAdmin.username}`),
      ]);
      expect(await enabledInKeycloak(orgAdmin)).toBe(true);
      expect(await enabledInKeycloak(masterAdmin)).toBe(true);
      expect(await rolesInKeycloak(orgAdmin)).toEqual([]);
      // Reading stays possible.
      expectResult(await call('GET', orgUsers(`/${orgAdmin.username}`), asAdmin), 200, '000-00000');
    });

    it("refuses the caller's own disable and delete", async () => {
      const self = await createUser('master');
      const asSelf = basicAuth(self);
      for (const [method, suffix] of [
        ['POST', '/disable'],
        ['DELETE', ''],
      ] as const) {
        const answer = await call(method, `/platform/users/${self.username}${suffix}`, asSelf);
        expectResult(answer, 403, '403-00002');
      }
      expect(await enabledInKeycloak(self)).toBe(true);
      expectResult(await call('GET', '/platform/organizations', asSelf), 200, '000-00000');
    });
  });

  describe('audit', () => {
    it('records every change with its action and target, never the password', async () => {
      const user = await createUser(org);
      const base = replica.url;
      const password = `Audited-${uniqueId('pw')}`;
      const path = orgUsers(`/${user.username}`);
      const steps = [
        ['POST', `${path}/disable`, 'user.disable'],
        ['POST', `${path}/enable`, 'user.enable'],
        ['PUT', `${path}/password`, 'user.password'],
        ['PUT', `${path}/workspaces/ws1`, 'user.grant'],
        ['DELETE', `${path}/workspaces/ws1`, 'user.revoke'],
        ['DELETE', path, 'user.delete'],
      ] as const;
      for (const [method, stepPath] of steps) {
        const body = method === 'PUT' && stepPath.endsWith('/password') ? { password } : undefined;
        expectResult(await call(method, stepPath, asAdmin, { base, body }), 200, '000-00000');
      }
      const lines = replicaLog
        .split('\n')
        .filter((line) => line.includes('"audit":true'))
        .map((line) => JSON.parse(line) as { action: string; outcome: string; target: unknown });
      for (const [, , action] of steps) {
        expect(lines.find((line) => line.action === action)).toMatchObject({
          outcome: 'success',
          target: { realm: org, username: user.username },
        });
      }
      expect(replicaLog).not.toContain(password);
    });
  });
});
