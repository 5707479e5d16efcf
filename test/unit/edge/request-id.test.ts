import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { requestIdOf } from '../../../src/edge/request-id.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const withId = (id: string | string[] | undefined) =>
  ({ headers: id === undefined ? {} : { 'x-request-id': id } }) as unknown as IncomingMessage;

describe('requestIdOf', () => {
  it("keeps a client's id of 1-128 letters, digits, '.', '_', ':' and '-'", () => {
    for (const id of ['a', 'trace-1.2_3:4', 'A'.repeat(128), '0af7651916cd43dd8448eb211c80319c']) {
      expect(requestIdOf(withId(id))).toBe(id);
    }
  });

  it('replaces a missing or malformed one with a new UUID, never failing', () => {
    const hostile = [
      undefined,
      '',
      'A'.repeat(129),
      'x'.repeat(100_000),
      'two words',
      'a,b',
      'id, id',
      '<script>',
      'a/b',
      'a\tb',
      'a\u0000b',
      'a\u007fb',
      'caf\u00e9',
      '\u202eevil',
      ['one', 'two'],
    ];
    const ids = hostile.map((id) => requestIdOf(withId(id)));
    for (const id of ids) expect(id).toMatch(UUID);
    expect(new Set(ids).size).toBe(ids.length);
  });
});
