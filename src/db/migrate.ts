import type { Knex } from 'knex';
import * as initial from './migrations/20261122-001-initial.ts';
import * as refreshTokenDetails from './migrations/20261125-002-refresh-token-details.ts';

interface NamedMigration {
  name: string;
  migration: Knex.Migration;
}

/**
 * Every migration, in order. Listed statically rather than globbed from disk so the same code
 * runs as TypeScript (Node strips the types), from a bundle, or from compiled output without
 * knowing file extensions.
 */
const migrations: readonly NamedMigration[] = [
  { name: '20261122-001-initial', migration: initial },
  { name: '20261125-002-refresh-token-details', migration: refreshTokenDetails },
];

const migrationSource: Knex.MigrationSource<NamedMigration> = {
  getMigrations: () => Promise.resolve([...migrations]),
  getMigrationName: (m) => m.name,
  getMigration: (m) => Promise.resolve(m.migration),
};

/**
 * Applies every pending migration; a no-op when the schema is current. Concurrent callers are
 * serialised by knex's migration lock table.
 */
export async function migrateToLatest(db: Knex): Promise<void> {
  await db.migrate.latest({ migrationSource });
}
