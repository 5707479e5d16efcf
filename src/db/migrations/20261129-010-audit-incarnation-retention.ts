import type { Knex } from 'knex';

/**
 * The retention of a deleted organization's audit records (audit/audit-retention.ts): when an
 * organization is created again under a deleted one's id, the days the deleted organization
 * chose move to the new organization's incarnation row, and keep governing the records before
 * it; the new organization's choice governs its own. A nullable column only (null: the
 * platform's default), so the previous release runs on this schema unchanged.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('audit_log_incarnations', (t) => {
    t.integer('prior_days').nullable();
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.alterTable('audit_log_incarnations', (t) => {
    t.dropColumn('prior_days');
  });
}
