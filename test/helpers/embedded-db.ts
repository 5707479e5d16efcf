import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import { openDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';

/**
 * The gateway's embedded PostgreSQL (PGlite) in a folder of its own, migrated, for one unit test
 * file; `close` destroys it and removes the folder. It starts slowly on a busy machine: give
 * the `beforeAll` that opens it a long timeout.
 */
export async function openEmbeddedDatabase(
  name: string,
): Promise<{ db: Knex; close: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `realmgate-${name}-`));
  const db = await openDatabase({ dataDir: dir });
  await migrateToLatest(db);
  return {
    db,
    close: async () => {
      await db.destroy();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
