import { toIsoTimestamp } from '../db/column-values.ts';
import type { AuditRecord } from './audit-chain.ts';

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
