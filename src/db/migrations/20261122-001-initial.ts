import type { Knex } from 'knex';

/** Creates the platform tables: organizations, their workspaces and workspace operations. */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('organizations', (t) => {
    // The organization id is the Keycloak realm name, so it is chosen by the caller.
    t.text('id').primary();
    t.text('name').notNullable();
    t.boolean('enabled').notNullable().defaultTo(true);
    t.text('status').notNullable().defaultTo('Organization Create Complete');
    t.timestamp('create_timestamp', { useTz: true }).notNullable().defaultTo(db.fn.now());
    t.timestamp('last_update_timestamp', { useTz: true }).notNullable().defaultTo(db.fn.now());
  });

  await db.schema.createTable('workspaces', (t) => {
    t.text('organization_id')
      .notNullable()
      .references('id')
      .inTable('organizations')
      .onDelete('CASCADE');
    t.text('id').notNullable();
    t.text('name').notNullable();
    t.text('description').notNullable().defaultTo('');
    t.jsonb('environments').notNullable().defaultTo(db.raw("'[]'::jsonb"));
    t.timestamp('create_timestamp', { useTz: true }).notNullable().defaultTo(db.fn.now());
    t.text('create_user').notNullable().defaultTo('');
    t.timestamp('last_update_timestamp', { useTz: true }).notNullable().defaultTo(db.fn.now());
    t.text('last_update_user').notNullable().defaultTo('');
    t.primary(['organization_id', 'id']);
  });

  await db.schema.createTable('operations', (t) => {
    t.text('operation_id').primary();
    t.text('organization_id').notNullable();
    t.text('workspace_id').notNullable();
    t.text('operation_name').notNullable();
    t.timestamp('scheduled_date_for_execution', { useTz: true }).nullable();
    t.timestamp('last_run_date', { useTz: true }).nullable();
    t.text('environment').nullable();
    t.text('remarks').nullable();
    t.boolean('discard').notNullable().defaultTo(false);
    t.timestamp('last_update_date_time', { useTz: true }).notNullable().defaultTo(db.fn.now());
    t.text('last_updated_user').notNullable().defaultTo('');
    t.foreign(['organization_id', 'workspace_id'])
      .references(['organization_id', 'id'])
      .inTable('workspaces')
      .onDelete('CASCADE');
    t.index(['organization_id', 'workspace_id']);
  });
}

/** Drops the platform tables, children first. */
export async function down(db: Knex): Promise<void> {
  await db.schema.dropTableIfExists('operations');
  await db.schema.dropTableIfExists('workspaces');
  await db.schema.dropTableIfExists('organizations');
}
