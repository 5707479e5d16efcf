import { describe, expect, it } from 'vitest';
import type { KeycloakAdmin } from '../../../src/keycloak/admin-client.ts';
import { deleteWorkspaceRoles } from '../../../src/platform/realm-admin/realm-lifecycle.ts';

/** An admin-client failure carrying an HTTP answer, as the client throws it. */
const failure = (status: number, responseData: unknown) =>
  Object.assign(new Error(`HTTP ${status}`), { response: { status }, responseData });

/** Client `<org>-workspaces` found; every request on a role then fails with `fails`. */
function adminWhoseRoleDeletesFail(fails: Error) {
  const deleted: string[] = [];
  const admin = {
    clients: {
      find: () => Promise.resolve([{ id: 'client-uuid' }]),
      delRole: ({ roleName }: { roleName: string }) => {
        deleted.push(roleName);
        return Promise.reject(fails);
      },
      // Unless told not to, the client reads any 404 as "no such role", a proxy's too.
      findRole: (_role: unknown, options?: { catchNotFound?: boolean }) =>
        options?.catchNotFound === false ? Promise.reject(fails) : Promise.resolve(null),
    },
  } as unknown as KeycloakAdmin;
  return { admin, deleted };
}

describe('deleteWorkspaceRoles', () => {
  it("takes Keycloak's own 404 for a role as the role already gone", async () => {
    const { admin, deleted } = adminWhoseRoleDeletesFail(
      failure(404, { error: 'Could not find role' }),
    );
    await expect(deleteWorkspaceRoles(admin, 'acme', 'ws1')).resolves.toBeUndefined();
    expect(deleted).toEqual(['ws1', '_ws1-admin']);
  });

  it("fails on a proxy's 404 (Keycloak away): the roles may still be there", async () => {
    const proxyPage = '<html><head><title>404 Not Found</title></head></html>';
    const { admin } = adminWhoseRoleDeletesFail(failure(404, proxyPage));
    await expect(deleteWorkspaceRoles(admin, 'acme', 'ws1')).rejects.toThrow('HTTP 404');
  });
});
