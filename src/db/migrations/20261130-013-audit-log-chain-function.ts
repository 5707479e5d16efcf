import type { Knex } from 'knex';

/**
 * The audit log's chain, computed by PostgreSQL (audit/audit-batch.ts): given the hash of the
 * record before and a batch's records as the openings of their canonical forms (each without
 * its `prevHash` and closing bracket, one a line; a JSON text never holds a raw newline), it
 * returns each record's canonical form and hash in order, SHA-256 of the form's UTF-8 bytes,
 * exactly as audit/audit-chain.ts `hashOf` takes it. A new function only, so the previous
 * release runs on this schema unchanged.
 */
export async function up(db: Knex): Promise<void> {
  await db.raw(`
    create or replace function audit_log_chain(prev_hash text, openings text)
    returns table (canonical text, hash text)
    language plpgsql immutable strict
    as $$
    declare
      opening text;
    begin
      hash := prev_hash;
      foreach opening in array string_to_array(openings, E'\\n') loop
        canonical := opening || ',"' || hash || '"]';
        hash := encode(sha256(convert_to(canonical, 'UTF8')), 'hex');
        return next;
      end loop;
    end
    $$`);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('drop function if exists audit_log_chain(text, text)');
}
