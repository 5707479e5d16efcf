import type { Knex } from 'knex';

/**
 * A download job notes the first record of what it covers (audit/download-jobs.ts), beside
 * `last_seq`: its download is refused (409) once retention removed that record, before a byte
 * of the zip goes out, instead of serving the records left as if they were all. A nullable
 * column only, so the previous release runs on this schema (it notes no first record, and its
 * jobs' downloads are served as before).
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('audit_download_jobs', (t) => {
    t.bigInteger('first_seq').nullable();
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.alterTable('audit_download_jobs', (t) => {
    t.dropColumn('first_seq');
  });
}
