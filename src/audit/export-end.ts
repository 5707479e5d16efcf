import type { AuditRecord } from './audit-chain.ts';
import {
  endClaimsOf,
  EXPORT_END_TYP,
  type CheckpointSigner,
  type ExportEnd,
  type ExportEndClaims,
} from './audit-checkpoints.ts';

// What an export writes last (audit-checkpoints.ts says what the end line holds and checks it;
// the CLI needs only that part).

/** `claims` signed with `signer` (the gateway's checkpoint key). */
export async function signedEnd(
  signer: CheckpointSigner,
  claims: ExportEndClaims,
): Promise<ExportEnd> {
  const jws = await signer.signAs(EXPORT_END_TYP, endClaimsOf(claims));
  return { ...endClaimsOf(claims), kid: signer.kid, jws };
}

export const endLine = (end: ExportEnd): string => `${JSON.stringify({ type: 'end', ...end })}\n`;

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
