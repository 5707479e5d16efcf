import type { Knex } from 'knex';

/**
 * Platform administrators' audit log downloads (audit/download-jobs.ts): a job of theirs covers
 * an organization's whole log, the records of organizations deleted before under its id
 * included, and outlives a new organization's creation under that id; an organization's own
 * readers' jobs hold its records only and are neither listed with nor counted against theirs. A
 * column with a default only, so the previous release runs on this schema (it would list an
 * administrator's job among the organization's, and serve its download limited to the
 * organization's own records).
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('audit_download_jobs', (t) => {
    t.boolean('whole_log').notNullable().defaultTo(false);
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.alterTable('audit_download_jobs', (t) => {
    t.dropColumn('whole_log');
  });
}
