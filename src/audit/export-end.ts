import type { JSONWebKeySet } from 'jose';
import type { AuditRecord } from './audit-chain.ts';
import { signedMisfit, type CheckpointSigner } from './audit-checkpoints.ts';

/**
 * The last line of a JSON Lines export: what it holds, from its first record to its last. A
 * file cut short still ends on a whole line and its chain holds, so without it a verifier
 * cannot tell a cut export from a whole one. Signed while the log is (a key of the
 * checkpoints', its own `typ`): removing records at the end and writing an end line that fits
 * them takes the key. Unsigned (the log off), it only tells an export cut by accident.
 */
export interface ExportEndClaims {
  org: string;
  /** The first and last record's numbers; null when the export holds none. */
  firstSeq: number | null;
  lastSeq: number | null;
  records: number;
  /** The last record's hash. */
  hash: string | null;
  /** ISO 8601: when the export ended. */
  at: string;
}

export type ExportEnd = ExportEndClaims & { kid?: string; jws?: string };

/** The JWS `typ` of an end line: no checkpoint or token passes for one. */
export const EXPORT_END_TYP = 'realmgate-audit-export-end';

/** The claims in a fixed order, nothing else. */
export function endClaimsOf(end: ExportEndClaims): ExportEndClaims {
  const { org, firstSeq, lastSeq, records, hash, at } = end;
  return { org, firstSeq, lastSeq, records, hash, at };
}

/** `claims` signed with `signer` (the gateway's checkpoint key). */
export async function signedEnd(
  signer: CheckpointSigner,
  claims: ExportEndClaims,
): Promise<ExportEnd> {
  const jws = await signer.signAs(EXPORT_END_TYP, endClaimsOf(claims));
  return { ...endClaimsOf(claims), kid: signer.kid, jws };
}

export const endLine = (end: ExportEnd): string => `${JSON.stringify({ type: 'end', ...end })}\n`;

/** Why a signed end line does not verify with `keys`, or undefined. */
export function endMisfit(
  end: ExportEnd & { kid: string; jws: string },
  keys: JSONWebKeySet,
): Promise<string | undefined> {
  return signedMisfit(end, endClaimsOf(end), keys, EXPORT_END_TYP, 'an end line');
}

/** The records of `org` an export wrote, for its end line. */
export function exportSpan(org: string): {
  saw(record: AuditRecord): void;
  claims(at: string): ExportEndClaims;
} {
  let first: AuditRecord | undefined;
  let last: AuditRecord | undefined;
  let records = 0;
  return {
    saw(record) {
      first ??= record;
      last = record;
      records++;
    },
    claims: (at) => ({
      org,
      firstSeq: first?.seq ?? null,
      lastSeq: last?.seq ?? null,
      records,
      hash: last?.hash ?? null,
      at,
    }),
  };
}

/** A JSON Lines export of records alone (the log off: nothing signs), closed by its end line. */
export async function* unsignedJsonLines(
  org: string,
  records: AsyncIterable<AuditRecord>,
  now: () => number,
): AsyncGenerator<string> {
  const span = exportSpan(org);
  for await (const record of records) {
    span.saw(record);
    yield `${JSON.stringify(record)}\n`;
  }
  yield endLine(span.claims(new Date(now()).toISOString()));
}
