import type { Knex } from 'knex';

/**
 * What the gateway knows of a refresh token beyond Keycloak's offline session: the name, reach
 * and lifetime its owner gave it at issuance, and its last use. Keyed by the session id (`sid`),
 * never by the token.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('refresh_token_details', (t) => {
    t.text('session_id').primary();
    t.text('realm').notNullable();
    t.text('user_id').notNullable();
    t.text('name').nullable();
    // Null: every workspace the user holds; else the ids the token may reach.
    t.jsonb('workspaces').nullable();
    t.boolean('read_only').notNullable().defaultTo(false);
    t.timestamp('expires_at', { useTz: true }).nullable();
    t.timestamp('last_used_at', { useTz: true }).nullable();
    t.text('last_used_address').nullable();
    t.text('last_used_agent').nullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(db.fn.now());
    t.index(['realm', 'user_id']);
  });
  // A name tells one of the user's tokens from the others: unique per user.
  await db.raw(
    'create unique index refresh_token_details_name on refresh_token_details (realm, user_id, name) where name is not null',
  );
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTableIfExists('refresh_token_details');
}
