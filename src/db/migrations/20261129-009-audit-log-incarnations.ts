import type { Knex } from 'knex';

/**
 * Where each organization's audit log begins for the organization's own readers
 * (audit/audit-incarnations.ts): an organization id may be used again once its organization
 * is deleted, and the log, kept by id, goes on as one chain. A row per creation of an
 * organization: the first record of that organization. A new table only, so the previous
 * release runs on this schema unchanged.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('audit_log_incarnations', (t) => {
    t.text('org').notNullable();
    t.bigInteger('first_seq').notNullable();
    t.primary(['org', 'first_seq']);
    t.timestamp('began_at', { useTz: true, precision: 3 }).notNullable();
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTableIfExists('audit_log_incarnations');
}
