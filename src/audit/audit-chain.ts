import * as crypto from 'node:crypto';

/**
 * One record of an organization's audit log as it is stored, exported and verified. Every field
 * is chosen where the record is made (never a copy of a request, a header or a body): names,
 * ids, outcomes, hashes; no password, token, secret, one-time password or proof.
 */
export interface AuditRecord {
  /** The log: an organization's id, or `master` (the platform's). */
  org: string;
  /** 1, 2, 3... in the log, without gaps (retention removes a prefix). */
  seq: number;
  /** ISO 8601 UTC with milliseconds: when it happened. */
  at: string;
  /** `api.request`, `auth.request`, `token.grant`, or a change (`organization.create`, `user.delete`...). */
  action: string;
  outcome: 'success' | 'failure';
  actorRealm: string | null;
  actorId: string | null;
  actorName: string | null;
  /** `basic`, `bearer`, `dpop`, `none` (no credentials), `other` (an unknown scheme). */
  credential: string | null;
  clientId: string | null;
  /** The name given to a job credential at issuance (docs/tokens-and-cli.md). */
  jobCredential: string | null;
  /** SHA-256 (hex) of the token's `jti`: tells one token's calls apart without keeping it. */
  jtiSha256: string | null;
  /** RFC 7638 thumbprint of the key a DPoP token is bound to. */
  jkt: string | null;
  method: string | null;
  /** The route table's path template. */
  route: string | null;
  /** The path as the edge read it, without the query. */
  path: string | null;
  workspace: string | null;
  /** The HTTP status answered. */
  status: number | null;
  /** The envelope's result code of a refusal (`401-00002`...). */
  result: string | null;
  /** Why it was refused (docs/audit.md lists the reasons). */
  reason: string | null;
  /** The client's address, as the edge vouches for it (TRUSTED_PROXIES). */
  address: string | null;
  requestId: string | null;
  /** What else the action names (a change's target, a grant's type): short strings only. */
  details: Record<string, string | string[]>;
  /** The hash of the record before it in the log; 64 zeros before the first. */
  prevHash: string;
  hash: string;
}

/** The fields a record's hash covers, in the order they are hashed. */
const HASHED = [
  'org',
  'seq',
  'at',
  'action',
  'outcome',
  'actorRealm',
  'actorId',
  'actorName',
  'credential',
  'clientId',
  'jobCredential',
  'jtiSha256',
  'jkt',
  'method',
  'route',
  'path',
  'workspace',
  'status',
  'result',
  'reason',
  'address',
  'requestId',
] as const satisfies readonly (keyof AuditRecord)[];

/**
 * What each element of a record's canonical form (`canonicalOf`) holds, in order: `version` is
 * the form's (`v1`), `details` the details as `[name, value]` entries sorted by name.
 */
export const CANONICAL_LAYOUT = ['version', ...HASHED, 'details', 'prevHash'] as const;

/** The `prevHash` of a log's first record. */
export const GENESIS_HASH = '0'.repeat(64);

/**
 * The text a record's hash is taken of: a JSON array of `v1`, every field in a fixed order, the
 * details as entries sorted by name, and the previous hash (`CANONICAL_LAYOUT`). One form,
 * whatever order a database or a JSON parser gives the details in.
 */
export function canonicalOf(record: Omit<AuditRecord, 'hash'>): string {
  return canonicalTextOf(record, record.seq, record.at, record.jtiSha256, record.prevHash);
}

/** A record's fields but its place in the log and its token's hash (see `canonicalTextOf`). */
export type CanonicalFields = Omit<AuditRecord, 'seq' | 'at' | 'jtiSha256' | 'prevHash' | 'hash'>;

/**
 * `canonicalOf`, with the fields the writer decides as it chains (number, time, the token's
 * hash, the previous hash) given apart from the others: it serialises a recorded event without
 * making a record object of it.
 */
export function canonicalTextOf(
  fields: CanonicalFields,
  seq: number,
  at: string,
  jtiSha256: string | null,
  prevHash: string,
): string {
  return canonicalFrom(
    canonicalHeadOf(fields.org),
    seq,
    chainedFieldsOf(fields, at, jtiSha256),
    prevHash,
  );
}

/** The canonical form up to its number: the form's version and the log. */
export function canonicalHeadOf(org: string): string {
  return `["v1",${JSON.stringify(org)},`;
}

/**
 * The canonical form's fields between its number and the previous hash, as JSON array
 * elements (the array's text without its brackets), in `CANONICAL_LAYOUT`'s order (a unit test
 * holds them together): reading each field by name is what makes it cheap. The part of a record
 * the writer makes; the database adds its number and previous hash as it chains it
 * (migration 20261202-015): never a newline, which JSON writes only escaped.
 */
export function chainedFieldsOf(
  fields: CanonicalFields,
  at: string,
  jtiSha256: string | null,
): string {
  const names = Object.keys(fields.details);
  const text = JSON.stringify([
    at,
    fields.action,
    fields.outcome,
    fields.actorRealm,
    fields.actorId,
    fields.actorName,
    fields.credential,
    fields.clientId,
    fields.jobCredential,
    jtiSha256,
    fields.jkt,
    fields.method,
    fields.route,
    fields.path,
    fields.workspace,
    fields.status,
    fields.result,
    fields.reason,
    fields.address,
    fields.requestId,
    names.length === 0 ? names : names.sort().map((n) => [n, fields.details[n]]),
  ]);
  return text.slice(1, -1);
}

/**
 * A record's canonical form from its head, number, chained fields and previous hash: the
 * concatenation the database's `audit_append` makes too (migration 20261202-015).
 */
export function canonicalFrom(head: string, seq: number, fields: string, prevHash: string): string {
  return `${head}${JSON.stringify(seq)},${fields},"${prevHash}"]`;
}

/** SHA-256 (hex) of a text: Node's one-shot `hash` where it has it (20.12 on), half the cost. */
export const sha256Hex: (text: string) => string =
  typeof crypto.hash === 'function'
    ? (text) => crypto.hash('sha256', text, 'hex')
    : (text) => crypto.createHash('sha256').update(text).digest('hex');

/**
 * The record's hash: SHA-256 (hex) of its canonical form; an export's reader computes it the
 * same way.
 */
export function hashOf(record: Omit<AuditRecord, 'hash'>): string {
  return sha256Hex(canonicalOf(record));
}

/** Where a sequence of records stops fitting its chain, and why; undefined when all fit. */
export interface ChainBreak {
  /** The first record that does not fit (its position in the sequence from 0, its seq). */
  index: number;
  seq: number | undefined;
  reason: string;
}

/**
 * Follows records of one log in order: each must hash to its `hash`, name the previous one's
 * hash, and come next in sequence. The first may start anywhere (retention removes a prefix):
 * its `prevHash` is what a checkpoint or an earlier export vouches for.
 */
export function createChainFollower(): {
  next(record: AuditRecord): string | undefined;
} {
  let previous: AuditRecord | undefined;
  return {
    next(record) {
      const reason = misfit(record, previous);
      previous = record;
      return reason;
    },
  };
}

function misfit(record: AuditRecord, previous: AuditRecord | undefined): string | undefined {
  if (hashOf(record) !== record.hash) return 'its hash does not match its content';
  if (previous === undefined) return undefined;
  if (record.org !== previous.org) return `it belongs to log ${record.org}, not ${previous.org}`;
  if (record.seq !== previous.seq + 1) {
    return `it is number ${record.seq}, after ${previous.seq}: a record is missing or moved`;
  }
  if (record.prevHash !== previous.hash) return 'it does not name the hash of the record before';
  return undefined;
}

/** Verifies records in order; the first that does not fit, or undefined. */
export function verifyChain(records: Iterable<AuditRecord>): ChainBreak | undefined {
  const follower = createChainFollower();
  let index = 0;
  for (const record of records) {
    const reason = follower.next(record);
    if (reason !== undefined) return { index, seq: record.seq, reason };
    index++;
  }
  return undefined;
}
