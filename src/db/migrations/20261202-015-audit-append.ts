import type { Knex } from 'knex';

/**
 * `audit_append(org, head, rows)`: appends records to an organization's audit log, chaining them
 * in the database (audit/audit-batch.ts). The writer sends each record's fields between its
 * number and its previous hash (`chainedFieldsOf`, one a line); under the log's head row lock
 * this numbers each record, completes its canonical form (`canonicalFrom`: head, number,
 * fields, previous hash), takes its SHA-256, stores the row and moves the head. What the gateway
 * spent on the hashing and the head's statements a batch is PostgreSQL's now, on its own CPU.
 *
 * The columns are read from the places of the chained fields in the canonical form v1
 * (audit-chain.ts `CANONICAL_LAYOUT`, from `at` to `details`), fixed as the form is: a form of
 * another version would come with a function of its own. A new function only, so the previous
 * release runs on this schema unchanged.
 */
export async function up(db: Knex): Promise<void> {
  await db.raw(`
    create function audit_append(p_org text, p_head text, p_rows text)
    returns table (last_seq bigint, last_hash text)
    language plpgsql as $body$
    declare
      v_first bigint;
      v_first_prev text;
      v_hash text;
      v_rows text[] := string_to_array(p_rows, E'\\n');
      v_hashes text[] := '{}';
      v_i integer := 0;
      v_fields text;
    begin
      insert into audit_log_heads (org, seq, hash) values (p_org, 0, repeat('0', 64))
        on conflict (org) do nothing;
      select h.seq, h.hash into v_first, v_hash from audit_log_heads h where h.org = p_org for update;
      v_first_prev := v_hash;
      foreach v_fields in array v_rows loop
        v_i := v_i + 1;
        v_hash := encode(sha256(convert_to(
          p_head || (v_first + v_i) || ',' || v_fields || ',"' || v_hash || '"]', 'UTF8')), 'hex');
        v_hashes[v_i] := v_hash;
      end loop;
      -- Each row's fields parsed once (offset 0 keeps the planner from parsing them again for
      -- every column that reads them).
      insert into audit_log (org, seq, at, action, outcome, actor_realm, actor_id, actor_name,
        credential, client_id, job_credential, jti_sha256, jkt, method, route, path, workspace,
        status, result, reason, address, request_id, details, prev_hash, hash)
      select p_org, v_first + i, (r->>0)::timestamptz, r->>1, r->>2, r->>3, r->>4, r->>5,
        r->>6, r->>7, r->>8, r->>9, r->>10, r->>11, r->>12, r->>13, r->>14,
        (r->>15)::integer, r->>16, r->>17, r->>18, r->>19,
        case when jsonb_array_length(r->20) = 0 then '{}'::jsonb
          else (select jsonb_object_agg(e->>0, e->1) from jsonb_array_elements(r->20) e) end,
        prev, hash
      from (
        select i, hash, coalesce(lag(hash) over (order by i), v_first_prev) as prev,
          ('[' || fields || ']')::jsonb as r
        from unnest(v_rows, v_hashes) with ordinality as u(fields, hash, i)
        offset 0
      ) as chained;
      update audit_log_heads set seq = v_first + v_i, hash = v_hash where org = p_org;
      return query select v_first + v_i, v_hash;
    end
    $body$
  `);
}

export async function down(db: Knex): Promise<void> {
  await db.raw('drop function if exists audit_append(text, text, text)');
}
