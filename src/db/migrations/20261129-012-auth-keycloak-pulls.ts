import type { Knex } from 'knex';

/**
 * Where the auth area stands in each realm's Keycloak events (audit/keycloak-event-cursors.ts):
 * the credential changes it ends Basic logins by are pulled also while the audit log is off, so
 * its cursors and lease are its own, the shape of `audit_keycloak_pulls`. Apart, neither moves
 * the other's cursor: a log turned on later takes its records from where it stopped, and the
 * auth area never waits for the log to catch up. A new table only, so the previous release runs
 * on this schema unchanged.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('auth_keycloak_pulls', (t) => {
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
  await db.schema.dropTableIfExists('auth_keycloak_pulls');
}
