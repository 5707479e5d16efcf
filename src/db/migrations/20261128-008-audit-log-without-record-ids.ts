import type { Knex } from 'knex';

/**
 * The audit log's records lose their `id` (migration 20261128-004) and its unique index, which
 * every insert paid for: the writer tells whether a batch it retries was already written by the
 * hash of the record its attempt placed last, at that place in the log (audit/audit-batch.ts).
 * No release reads the column: the log came after 0.2.0.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('audit_log', (t) => t.dropColumn('id'));
}

export async function down(db: Knex): Promise<void> {
  await db.schema.alterTable('audit_log', (t) => t.uuid('id').nullable().unique());
}
