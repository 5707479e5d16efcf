import { toIsoTimestamp } from '../db/column-values.ts';
import { CANONICAL_LAYOUT, type AuditRecord } from './audit-chain.ts';

export const AUDIT_TABLE = 'audit_log';
export const HEADS_TABLE = 'audit_log_heads';

/** The columns a record's field is kept in, for the reader's filters and order. */
export const COLUMN_OF = {
  org: 'org',
  seq: 'seq',
  at: 'at',
  action: 'action',
  outcome: 'outcome',
  actorRealm: 'actor_realm',
  actorId: 'actor_id',
  actorName: 'actor_name',
  credential: 'credential',
  clientId: 'client_id',
  jobCredential: 'job_credential',
  jtiSha256: 'jti_sha256',
  jkt: 'jkt',
  method: 'method',
  route: 'route',
  path: 'path',
  workspace: 'workspace',
  status: 'status',
  result: 'result',
  reason: 'reason',
  address: 'address',
  requestId: 'request_id',
  details: 'details',
  prevHash: 'prev_hash',
  hash: 'hash',
} as const satisfies Record<keyof AuditRecord, string>;

/** A row of `audit_log` (migrations 20261128-004 and -008), as either driver gives it. */
export type AuditRow = Record<(typeof COLUMN_OF)[keyof AuditRecord], unknown>;

/** The columns PostgreSQL casts from the JSON text of a batch; the others are text. */
const CAST_OF: Partial<Record<keyof AuditRecord, string>> = {
  seq: 'bigint',
  at: 'timestamptz',
  status: 'integer',
};

/** The details column from their canonical entries (`[name, value]`...); none is `{}`. */
const detailsFrom = (entries: string) =>
  `case when jsonb_array_length(${entries}) = 0 then '{}'::jsonb ` +
  `else (select jsonb_object_agg(e->>0, e->1) from jsonb_array_elements(${entries}) e) end`;

/**
 * The statement that appends one log's batch and moves its head: two parameters, the hash of
 * the head and the batch's records as the openings of their canonical forms, one a line
 * (`canonicalOpeningOf`), which PostgreSQL chains (`audit_log_chain`, migration 20261130-013:
 * each record's form completed with the hash before it, and its SHA-256) and reads once, rather
 * than 26 bound values a record; the third, the log. Each column is read from its place in the
 * canonical form (`CANONICAL_LAYOUT`), so what is stored is what was hashed. It answers the
 * head's new hash.
 */
export const APPEND_BATCH = (() => {
  const columns = ['hash'];
  const values = ['c.hash'];
  CANONICAL_LAYOUT.forEach((field, at) => {
    if (field === 'version') return;
    columns.push(COLUMN_OF[field]);
    const cast = CAST_OF[field];
    if (field === 'details') values.push(detailsFrom(`r->${at}`));
    else values.push(cast ? `(r->>${at})::${cast}` : `r->>${at}`);
  });
  return (
    `with inserted as (insert into ${AUDIT_TABLE} (${columns.join(', ')}) ` +
    `select ${values.join(', ')} from audit_log_chain(?, ?) c, ` +
    // `offset 0`: the form is parsed once a record, not once a column.
    `lateral (select c.canonical::jsonb r offset 0) j returning seq, hash) ` +
    `update ${HEADS_TABLE} h set seq = i.seq, hash = i.hash ` +
    `from (select seq, hash from inserted order by seq desc limit 1) i ` +
    `where h.org = ? returning h.hash`
  );
})();

/** The record a row holds, as the chain hashed it (PostgreSQL's and PGlite's types alike). */
export function recordOf(row: AuditRow): AuditRecord {
  const record: Record<string, unknown> = {};
  for (const [field, column] of Object.entries(COLUMN_OF)) record[field] = row[column];
  record.seq = Number(row.seq);
  record.at = toIsoTimestamp(row.at);
  record.details =
    typeof row.details === 'string' ? (JSON.parse(row.details) as unknown) : row.details;
  return record as unknown as AuditRecord;
}
