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
 * The statement that appends a batch's records: one parameter, the rows of a JSON array (see
 * `batchRowOf`) joined by commas, which PostgreSQL puts in brackets and reads once, rather than
 * 26 bound values a record (the brackets added here: the gateway's text stays one flat string). The row is
 * the record's canonical form, the text its hash was taken of, so the records are serialised
 * once; each column is read from its place in it (`CANONICAL_LAYOUT`).
 */
export const INSERT_BATCH = (() => {
  const columns = ['hash'];
  const values = ['r->>0'];
  CANONICAL_LAYOUT.forEach((field, i) => {
    if (field === 'version') return;
    const at = i + 1;
    columns.push(COLUMN_OF[field]);
    const cast = CAST_OF[field];
    if (field === 'details') values.push(detailsFrom(`r->${at}`));
    else values.push(cast ? `(r->>${at})::${cast}` : `r->>${at}`);
  });
  return (
    `insert into ${AUDIT_TABLE} (${columns.join(', ')}) ` +
    `select ${values.join(', ')} from jsonb_array_elements(('[' || ? || ']')::jsonb) r`
  );
})();

/** A record's row of a batch (`INSERT_BATCH`): `[hash, ...its canonical form]`. */
export function batchRowOf(hash: string, canonical: string): string {
  return `["${hash}",${canonical.slice(1)}`;
}

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
