import type { Knex } from 'knex';

/**
 * The key a refresh token is bound to (DPoP, RFC 9449): the JWK SHA-256 thumbprint Keycloak
 * put in its access token's `cnf.jkt` when it opened the session, so that `tokens list` can say
 * which tokens a copy alone cannot use. Null: a bearer token (or one issued before this).
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.alterTable('refresh_token_details', (t) => {
    t.text('dpop_jkt').nullable();
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.alterTable('refresh_token_details', (t) => {
    t.dropColumn('dpop_jkt');
  });
}
