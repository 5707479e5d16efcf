import type { Knex } from 'knex';

/**
 * Which realm was last found aligned (platform/realm-alignment.ts), by Keycloak's id of the
 * realm (a realm deleted and made again under its name has another), for which back-channel
 * logout URL and which version of the alignment's steps, and when (the database's clock): a
 * replica's start skips a realm recorded for its URL and version within the last day, so it
 * costs Keycloak one listing instead of two reads a realm. A new table only, so the previous
 * release runs on this schema unchanged (it never reads it, and aligns every realm as before).
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('realm_alignments', (t) => {
    t.text('realm_id').primary();
    t.text('realm').notNullable();
    t.text('url').notNullable();
    t.integer('steps_version').notNullable();
    t.timestamp('aligned_at', { useTz: true }).notNullable().defaultTo(db.fn.now());
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTableIfExists('realm_alignments');
}
