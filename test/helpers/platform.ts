import knex, { type Knex } from 'knex';
import { createOperationsRepo } from '../../src/automation/operations.repo.ts';
import { createOrganizationsRepo } from '../../src/platform/organizations.repo.ts';
import { createWorkspacesRepo } from '../../src/platform/workspaces.repo.ts';
import { createOrganizationRealm } from './keycloak.ts';
import { testEnv } from './test-env.ts';

let db: Knex | undefined;

/** One knex handle per test worker, on the database the test gateway uses. */
export function testDb(): Knex {
  db ??= knex({ client: 'pg', connection: testEnv().databaseUrl, pool: { min: 0, max: 4 } });
  return db;
}

/** Closes the worker's handle (call from afterAll of suites that used testDb). */
export async function closeTestDb(): Promise<void> {
  await db?.destroy();
  db = undefined;
}

/**
 * A complete organization as provisioning makes it: realm (with workspace roles) and database
 * rows, with `operationsPerWorkspace` operations in each workspace.
 */
export async function createOrganization(
  workspaces: string[],
  operationsPerWorkspace = 0,
): Promise<string> {
  const organizationId = await createOrganizationRealm(workspaces);
  await createOrganizationsRepo(testDb()).insertIfAbsent({
    id: organizationId,
    name: `Test ${organizationId}`,
  });
  for (const ws of workspaces) {
    await createWorkspacesRepo(testDb()).insertIfAbsent({
      organizationId,
      id: ws,
      name: `Workspace ${ws}`,
    });
    for (let i = 0; i < operationsPerWorkspace; i++) {
      await createOperationsRepo(testDb()).insert({
        organizationId,
        workspaceId: ws,
        operationName: `op-${i}`,
      });
    }
  }
  return organizationId;
}
