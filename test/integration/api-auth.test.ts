import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessTokenOf, basicAuth, callApi } from '../helpers/api.ts';
import { expectDocumentedAnswer } from '../helpers/documented-answer.ts';
import { createUser, keycloakAdmin, userIdOf, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { createWorkspacesRepo } from '../../src/platform/workspaces.repo.ts';

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/**
 * Makes `user` an organization manager as the reference platform does: its realm role
 * `_organization-manager`, a composite of the authority `_og-ws-mt` (maintain workspaces).
 */
async function grantOrganizationManager(user: TestUser): Promise<void> {
  const kc = await keycloakAdmin();
  const realm = user.realm;
  for (const name of ['_og-ws-mt', '_organization-manager']) {
    await kc.roles.create({ realm, name }).catch(() => undefined);
  }
  const authority = await kc.roles.findOneByName({ realm, name: '_og-ws-mt' });
  const manager = await kc.roles.findOneByName({ realm, name: '_organization-manager' });
  await kc.roles.createComposite({ realm, roleId: manager!.id! }, [authority!]);
  await kc.users.addRealmRoleMappings({
    realm,
    id: await userIdOf(user),
    roles: [{ id: manager!.id!, name: manager!.name! }],
  });
}

describe('Basic and Bearer on the list endpoints (spec 4.2-4.4)', () => {
  let org: string;
  let admin: TestUser;
  let member: TestUser;
  let outsider: TestUser;

  beforeAll(async () => {
    org = await createOrganization(['ws-a', 'ws-b'], 3);
    admin = await createUser('master');
    member = await createUser(org, { workspaceRoles: ['ws-a'] });
    outsider = await createUser(org);
  });
  afterAll(closeTestDb);

  async function bothSchemes(user: TestUser): Promise<Array<[string, string]>> {
    return [
      ['Basic', basicAuth(user)],
      ['Bearer', `Bearer ${await accessTokenOf(user)}`],
    ];
  }

  it('lists organizations for an administrator', async () => {
    for (const [, authorization] of await bothSchemes(admin)) {
      const res = await callApi('/api/platform/organizations', authorization);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ message: 'SUCCESS', result: '000-00000' });
      expect(res.body.ts).toMatch(ISO_MS);
      const mine = (res.body.data as Array<Record<string, unknown>>).find((o) => o.id === org);
      expect(mine).toMatchObject({ id: org, name: `Test ${org}`, enabled: true });
      expectDocumentedAnswer('listOrganizations', res.body);
    }
  });

  it('lists only the workspaces an organization user has a role for', async () => {
    for (const [, authorization] of await bothSchemes(member)) {
      const res = await callApi(`/api/${org}/platform/workspaces`, authorization);
      expect(res.status).toBe(200);
      expect((res.body.data as Array<{ id: string }>).map((w) => w.id)).toEqual(['ws-a']);
      expectDocumentedAnswer('listWorkspaces', res.body);
    }
    const none = await callApi(`/api/${org}/platform/workspaces`, basicAuth(outsider));
    expect(none.status).toBe(200);
    expect(none.body.data).toEqual([]);
  });

  it('lists every workspace to an organization manager, whose workspaces stay closed to it', async () => {
    const manager = await createUser(org);
    await grantOrganizationManager(manager);
    for (const [, authorization] of await bothSchemes(manager)) {
      const res = await callApi(`/api/${org}/platform/workspaces`, authorization);
      expect(res.status).toBe(200);
      expect((res.body.data as Array<{ id: string }>).map((w) => w.id)).toEqual(['ws-a', 'ws-b']);
      expectDocumentedAnswer('listWorkspaces', res.body);
      // Seeing a workspace listed is not holding its role.
      const operations = await callApi(
        `/api/${org}/workspaces/ws-a/ita/menu/operation_list/filter/`,
        authorization,
      );
      expect(operations.status).toBe(403);
    }
  });

  it('keeps the workspaces whose name is ?workspace_name=, as the reference platform does', async () => {
    const named = await createOrganization(['ws-1', 'ws-2']);
    await createWorkspacesRepo(testDb()).insertIfAbsent({
      organizationId: named,
      id: 'ws-3',
      name: '100%_完了',
    });
    const manager = await createUser(named);
    await grantOrganizationManager(manager);
    const listed = async (query: string) => {
      const res = await callApi(`/api/${named}/platform/workspaces?${query}`, basicAuth(manager));
      expect({ query, status: res.status }).toEqual({ query, status: 200 });
      expectDocumentedAnswer('listWorkspaces', res.body);
      return (res.body.data as Array<{ id: string }>).map((w) => w.id);
    };
    const name = (value: string) => `workspace_name=${encodeURIComponent(value)}`;
    expect(await listed(name('Workspace ws-2'))).toEqual(['ws-2']);
    expect(await listed(name('100%_完了'))).toEqual(['ws-3']);
    // The name as written: no wildcard, no other letter case, no part of it.
    for (const other of ['Workspace%', 'Workspace_ws-2', '100%', 'workspace ws-2', 'ws-2', '\0']) {
      expect(await listed(name(other))).toEqual([]);
    }
    expect(await listed('workspace_name=%00')).toEqual([]);
    // Absent or empty: every workspace, as there.
    expect(await listed('')).toEqual(['ws-1', 'ws-2', 'ws-3']);
    expect(await listed('workspace_name=')).toEqual(['ws-1', 'ws-2', 'ws-3']);
    // Two names are not one.
    const twice = await callApi(
      `/api/${named}/platform/workspaces?${name('Workspace ws-1')}&${name('Workspace ws-2')}`,
      basicAuth(manager),
    );
    expect({ status: twice.status, result: twice.body.result }).toEqual({
      status: 400,
      result: '400-00002',
    });
  });

  it('lists every operation of a workspace for a user with its role', async () => {
    for (const [, authorization] of await bothSchemes(member)) {
      const res = await callApi(
        `/api/${org}/workspaces/ws-a/ita/menu/operation_list/filter/`,
        authorization,
      );
      expect(res.status).toBe(200);
      const names = (res.body.data as Array<{ parameter: { operation_name: string } }>).map(
        (o) => o.parameter.operation_name,
      );
      expectDocumentedAnswer('listOperations', res.body);
      expect(names).toEqual(['op-0', 'op-1', 'op-2']);
    }
  });

  it('answers the result codes of compat.md', async () => {
    const cases: Array<[string, string | undefined, number, string]> = [
      [`/api/platform/organizations`, undefined, 401, '401-00002'],
      [`/api/platform/organizations`, basicAuth({ ...admin, password: 'wrong' }), 401, '401-00002'],
      [
        `/api/${org}/workspaces/ws-b/ita/menu/operation_list/filter/`,
        basicAuth(member),
        403,
        '403-00001',
      ],
      [
        `/api/${org}/workspaces/ws-a/ita/menu/operation_list/filter/`,
        basicAuth(outsider),
        403,
        '403-00001',
      ],
      [`/api/no-such-org/platform/workspaces`, basicAuth(member), 404, '404-00001'],
      [
        `/api/${org}/workspaces/nope/ita/menu/operation_list/filter/`,
        basicAuth(member),
        404,
        '404-00002',
      ],
      [`/api/${org}/no/such/route`, basicAuth(member), 404, '404-00000'],
    ];
    for (const [path, authorization, status, result] of cases) {
      const res = await callApi(path, authorization);
      expect({ path, status: res.status, result: res.body.result }).toEqual({
        path,
        status,
        result,
      });
      expect(res.body.data).toBeNull();
      expect(res.body.ts).toMatch(ISO_MS);
    }
  });
});
