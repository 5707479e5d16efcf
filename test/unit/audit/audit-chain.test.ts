import { describe, expect, it } from 'vitest';
import {
  CANONICAL_LAYOUT,
  canonicalOf,
  hashOf,
  verifyChain,
} from '../../../src/audit/audit-chain.ts';
import { chainedLog } from '../../helpers/audit-records.ts';

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
});
