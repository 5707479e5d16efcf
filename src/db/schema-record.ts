import type { Knex } from 'knex';
import type { SchemaRecord } from './schema-history.ts';

/**
 * The one table outside the migration list: which releases may run on this schema, written by
 * the replica that migrates it, read by every replica at start, before its migration. It cannot
 * be a migration: it must be readable by a release that does not know the migrations after its
 * own, and a migration unknown to a release is what keeps it from starting (knex refuses them).
 * One row; created the first time a release that knows it migrates (0.2.0 on).
 */
export const SCHEMA_RECORD_TABLE = 'realmgate_schema';

/** The migrations the database has applied, in order; none when knex has never run there. */
export async function appliedMigrations(db: Knex): Promise<string[]> {
  if (!(await db.schema.hasTable('knex_migrations'))) return [];
  return db('knex_migrations').orderBy('id').pluck<string[]>('name');
}

/** The database's record, undefined when no release has written one yet. */
export async function readSchemaRecord(db: Knex): Promise<SchemaRecord | undefined> {
  if (!(await db.schema.hasTable(SCHEMA_RECORD_TABLE))) return undefined;
  const row = await db(SCHEMA_RECORD_TABLE)
    .where({ id: 1 })
    .first<{ readable_from: string; migrated_by: string } | undefined>();
  return row && { readableFrom: row.readable_from, migratedBy: row.migrated_by };
}

/** Writes the record (the table first, if missing); only the one migrator calls this. */
export async function writeSchemaRecord(db: Knex, record: SchemaRecord): Promise<void> {
  if (!(await db.schema.hasTable(SCHEMA_RECORD_TABLE))) {
    await db.schema.createTable(SCHEMA_RECORD_TABLE, (t) => {
      t.smallint('id').primary().checkIn(['1']);
      t.text('readable_from').notNullable();
      t.text('migrated_by').notNullable();
      t.timestamp('migrated_at', { useTz: true }).notNullable().defaultTo(db.fn.now());
    });
  }
  const row = {
    id: 1,
    readable_from: record.readableFrom,
    migrated_by: record.migratedBy,
    migrated_at: db.fn.now(),
  };
  await db(SCHEMA_RECORD_TABLE).insert(row).onConflict('id').merge();
}
