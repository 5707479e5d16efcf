import type { Knex } from 'knex';

/**
 * The reference platform's audit log downloads (docs/audit.md, "Download jobs"): a job per
 * requested time range of an organization's log. A new table only, so the previous release runs
 * on this schema unchanged.
 *
 * A job is claimed by one replica (`for update skip locked`), which fixes what it covers: the
 * records of the range up to `last_seq`, the log's end when it ran. The zip is made from those
 * records when downloaded, by any replica, so no file is kept; the job row is deleted once
 * `expires_at` passes.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('audit_download_jobs', (t) => {
    t.text('id').primary();
    t.text('org').notNullable();
    t.text('status').notNullable();
    // The range as sent (the reference's UI shows it back), and as read.
    t.jsonb('conditions').notNullable();
    t.timestamp('range_from', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('range_to', { useTz: true, precision: 3 }).notNullable();
    t.bigInteger('last_seq').nullable();
    t.integer('count_export').nullable();
    t.text('message').nullable();
    t.text('created_by_id').nullable();
    t.text('created_by_name').nullable();
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('updated_at', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('expires_at', { useTz: true, precision: 3 }).notNullable();
    t.index(['org', 'created_at']);
    t.index(['status']);
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTableIfExists('audit_download_jobs');
}
