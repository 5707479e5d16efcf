import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CANONICAL_LAYOUT,
  canonicalOf,
  hashOf,
  verifyChain,
} from '../../../src/audit/audit-chain.ts';
import { chainedLog } from '../../helpers/audit-records.ts';

/** Form v1 as first written: each field of the layout in turn, the details sorted by name. */
function canonicalV1(record: Record<string, unknown>): string {
  return JSON.stringify(
    CANONICAL_LAYOUT.map((field) => {
      if (field === 'version') return 'v1';
      if (field !== 'details') return record[field];
      const details = record.details as Record<string, unknown>;
      return Object.keys(details)
        .sort()
        .map((name) => [name, details[name]]);
    }),
  );
}

describe('audit chain', () => {
  it('verifies a whole log, and a log whose first records retention removed', () => {
    const log = chainedLog(10);
    expect(verifyChain(log)).toBeUndefined();
    expect(verifyChain(log.slice(4))).toBeUndefined();
  });

  it('hashes the details whatever order their names come in', () => {
    const [record] = chainedLog(1);
    const reordered = { ...record!, details: { a: ['one'], b: 'two' } };
    expect(hashOf(reordered)).toBe(record!.hash);
  });

  it('names the first record edited, whatever the field', () => {
    for (const edit of [
      { actorName: 'mallory' },
      { outcome: 'success' as const },
      { details: { b: 'two', a: ['one', 'more'] } },
      { at: '2026-11-01T00:00:00.001Z' },
      { status: 403 },
    ]) {
      const log = chainedLog(10);
      log[5] = { ...log[5]!, ...edit };
      expect(verifyChain(log)).toMatchObject({ index: 5, seq: 6 });
    }
  });

  it('names the record after one removed, and one rehashed after an edit', () => {
    const log = chainedLog(10);
    expect(verifyChain([...log.slice(0, 3), ...log.slice(4)])).toMatchObject({
      seq: 5,
      reason: expect.stringContaining('missing') as unknown,
    });
    const rehashed = chainedLog(10);
    const edited = { ...rehashed[2]!, actorName: 'mallory' };
    rehashed[2] = { ...edited, hash: hashOf(edited) };
    expect(verifyChain(rehashed)).toMatchObject({
      seq: 4,
      reason: 'it does not name the hash of the record before',
    });
  });

  it('refuses a record of another log in the sequence', () => {
    const log = chainedLog(3);
    const other = chainedLog(4, 'globex')[3]!;
    expect(verifyChain([...log, other])).toMatchObject({ index: 3 });
  });

  it('writes the fields in the order of the canonical layout, each once', () => {
    // Each field holds its own name: the canonical form then spells out the order it is written in.
    const named = Object.fromEntries(CANONICAL_LAYOUT.map((field) => [field, field]));
    const text = canonicalOf({ ...named, details: {} } as never);
    expect(text).toBe(
      JSON.stringify(
        CANONICAL_LAYOUT.map((field) =>
          field === 'details' ? [] : field === 'version' ? 'v1' : field,
        ),
      ),
    );
  });

  it('is form v1 byte for byte, whatever text a field holds', () => {
    // Any text a client may send: control characters, quotes, non-ASCII, lone surrogates.
    const text = fc.oneof(
      fc.string(),
      fc.string({ unit: 'grapheme' }),
      fc.string({ unit: 'binary' }),
    );
    const [base] = chainedLog(1);
    fc.assert(
      fc.property(
        fc.record({
          actorName: fc.option(text),
          path: text,
          reason: fc.option(text),
          jkt: fc.option(text),
        }),
        fc.dictionary(text, fc.oneof(text, fc.array(text))),
        fc.option(fc.integer({ min: 100, max: 599 })),
        (fields, details, status) => {
          const record = { ...base!, ...fields, details, status };
          expect(canonicalOf(record)).toBe(canonicalV1(record));
        },
      ),
    );
  });
});
