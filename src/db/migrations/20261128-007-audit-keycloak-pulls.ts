import type { Knex } from 'knex';

/**
 * Where the audit log stands in each realm's Keycloak events (audit/keycloak-event-pulls.ts):
 * one row per realm with a cursor per kind of event (the time of the last event taken, in
 * Keycloak's epoch milliseconds, and the ids of the events taken at that time, since several
 * share one millisecond), and the lease of the one replica pulling the realm now. A new table
 * only, so the previous release runs on this schema unchanged.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('audit_keycloak_pulls', (t) => {
    t.text('realm').primary();
    t.bigInteger('user_time').nullable();
    t.jsonb('user_ids').notNullable().defaultTo('[]');
    t.bigInteger('admin_time').nullable();
    t.jsonb('admin_ids').notNullable().defaultTo('[]');
    t.text('holder').nullable();
    t.timestamp('lease_until', { useTz: true }).nullable();
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTableIfExists('audit_keycloak_pulls');
}
