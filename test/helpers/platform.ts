import knex, { type Knex } from 'knex';
import { createOperationsRepo } from '../../src/automation/operations.repo.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { createOrganizationsRepo } from '../../src/platform/organizations.repo.ts';
import { createWorkspacesRepo } from '../../src/platform/workspaces.repo.ts';
import { createOrganizationRealm } from './keycloak.ts';
import type { OwnDatabase } from './postgres-server.ts';
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
 * rows, with `operationsPerWorkspace` operations in each workspace; the rows in `db` (a suite's
 * own database) when given, else in the test gateway's.
 */
export async function createOrganization(
  workspaces: string[],
  operationsPerWorkspace = 0,
  db: Knex = testDb(),
): Promise<string> {
  const organizationId = await createOrganizationRealm(workspaces);
  await createOrganizationsRepo(db).insertIfAbsent({
    id: organizationId,
    name: `Test ${organizationId}`,
  });
  for (const ws of workspaces) {
    await createWorkspacesRepo(db).insertIfAbsent({
      organizationId,
      id: ws,
      name: `Workspace ${ws}`,
    });
    for (let i = 0; i < operationsPerWorkspace; i++) {
      await createOperationsRepo(db).insert({
        organizationId,
        workspaceId: ws,
        operationName: `op-${i}`,
      });
    }
  }
  return organizationId;
}

/**
 * A database of the suite's own (ownDatabase), made and migrated, and a handle on it: a replica
 * on it pulls Keycloak's events of master and of the organizations made there only, so its
 * rounds take as long whatever other suites made in the shared database.
 */
export async function migratedOwnDatabase(database: OwnDatabase): Promise<Knex> {
  await database.create();
  const connection = { connectionString: database.url() };
  const db = knex({ client: 'pg', connection, pool: { min: 0, max: 4 } });
  await migrateToLatest(db);
  return db;
}
