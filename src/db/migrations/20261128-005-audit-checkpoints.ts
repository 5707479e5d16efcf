import type { Knex } from 'knex';

/**
 * Signed checkpoints of the audit logs (docs/audit.md), the public keys they were signed with,
 * and each organization's own retention. New tables only, so the previous release runs on this
 * schema unchanged.
 *
 * A checkpoint is a JWS (EdDSA) over a log's head at one moment: its org, sequence number, the
 * hash of that record and that record's time. One per log and sequence number: two replicas
 * checkpointing one head write one row. `audit_signing_keys` lists the public key of every key
 * a checkpoint was signed with (never a private key), so the gateway can publish them.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('audit_checkpoints', (t) => {
    t.text('org').notNullable();
    t.bigInteger('seq').notNullable();
    t.primary(['org', 'seq']);
    t.text('hash').notNullable();
    // The time of the record at `seq`: an export of a time range takes the checkpoints of it.
    t.timestamp('record_at', { useTz: true, precision: 3 }).notNullable();
    t.timestamp('at', { useTz: true, precision: 3 }).notNullable();
    t.text('kid').notNullable();
    t.text('jws').notNullable();
  });
  await db.schema.createTable('audit_signing_keys', (t) => {
    t.text('kid').primary();
    t.jsonb('jwk').notNullable();
    t.timestamp('created_at', { useTz: true, precision: 3 }).notNullable();
  });
  await db.schema.createTable('audit_retention', (t) => {
    t.text('org').primary();
    t.integer('days').notNullable();
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTableIfExists('audit_retention');
  await db.schema.dropTableIfExists('audit_signing_keys');
  await db.schema.dropTableIfExists('audit_checkpoints');
}
