import type { Knex } from 'knex';

/**
 * The audit log (docs/audit.md): one hash-chained sequence of records per organization (and
 * master's), and the head of each chain. New tables only, so the previous release runs on this
 * schema unchanged.
 *
 * A record is written once and never updated; `hash` covers every column but itself (see
 * audit/audit-chain.ts), `prev_hash` is the hash of the record before it in the same log.
 * `audit_log_heads` holds each log's last sequence number and hash: the writer locks its row
 * (`for update`) to append, so two replicas writing one log keep one order and one chain.
 */
export async function up(db: Knex): Promise<void> {
  await db.schema.createTable('audit_log_heads', (t) => {
    t.text('org').primary();
    t.bigInteger('seq').notNullable();
    t.text('hash').notNullable();
  });
  await db.schema.createTable('audit_log', (t) => {
    t.text('org').notNullable();
    t.bigInteger('seq').notNullable();
    t.primary(['org', 'seq']);
    // Made by the recording process: a batch retried after an unclear commit is not written twice.
    t.uuid('id').notNullable().unique();
    t.timestamp('at', { useTz: true, precision: 3 }).notNullable();
    t.text('action').notNullable();
    t.text('outcome').notNullable();
    t.text('actor_realm').nullable();
    t.text('actor_id').nullable();
    t.text('actor_name').nullable();
    t.text('credential').nullable();
    t.text('client_id').nullable();
    t.text('job_credential').nullable();
    t.text('jti_sha256').nullable();
    t.text('jkt').nullable();
    t.text('method').nullable();
    t.text('route').nullable();
    t.text('path').nullable();
    t.text('workspace').nullable();
    t.integer('status').nullable();
    t.text('result').nullable();
    t.text('reason').nullable();
    t.text('address').nullable();
    t.text('request_id').nullable();
    t.jsonb('details').notNullable();
    t.text('prev_hash').notNullable();
    t.text('hash').notNullable();
    // The reader's filters: a time range first, within one organization.
    t.index(['org', 'at']);
  });
}

export async function down(db: Knex): Promise<void> {
  await db.schema.dropTableIfExists('audit_log');
  await db.schema.dropTableIfExists('audit_log_heads');
}
