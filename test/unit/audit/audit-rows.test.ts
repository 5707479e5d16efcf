import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalOf, hashOf, sha256Hex } from '../../../src/audit/audit-chain.ts';
import { createBatchText } from '../../../src/audit/audit-rows.ts';
import { chainedLog } from '../../helpers/audit-records.ts';

/** A batch's bytes as the writer made them before: the rows' texts joined, then encoded. */
function joinedRowsOf(canonicals: string[]): Buffer {
  const rows = canonicals.map((canonical) => `["${sha256Hex(canonical)}",${canonical.slice(1)}`);
  return Buffer.from(`[${rows.join(',')}]`);
}

describe('a batch of audit rows', () => {
  it('holds each canonical form, hashed as the chain hashes it, byte for byte', () => {
    // Any text a client may send in a field: control characters, quotes, non-ASCII, astral.
    const text = fc.oneof(
      fc.string(),
      fc.string({ unit: 'grapheme' }),
      fc.string({ unit: 'binary' }),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(text, text, fc.option(text)), { maxLength: 40 }), (fields) => {
        const records = chainedLog(fields.length).map((record, i) => {
          const [actorName, path, reason] = fields[i]!;
          return { ...record, actorName, path, reason, details: { [path]: actorName } };
        });
        const canonicals = records.map((record) => canonicalOf(record));
        const batch = createBatchText(1);
        const hashes = canonicals.map((canonical) => batch.add(canonical));
        expect(hashes).toEqual(records.map((record) => hashOf(record)));
        expect(batch.bytes().equals(joinedRowsOf(canonicals))).toBe(true);
      }),
    );
  });
});
