import { describe, expect, it } from 'vitest';
import { parseDuration, parseFlag, parseTimestamp } from '../../../src/cli/values.ts';

describe('values', () => {
  it.each([
    ['1', 1],
    ['3600', 3600],
    ['45s', 45],
    ['15m', 900],
    ['1h', 3600],
    ['1d', 86_400],
    ['365d', 31_536_000],
    ['24855d', 2_147_472_000],
  ])('reads duration %s as %i seconds', (text, seconds) => {
    expect(parseDuration(text, '--access')).toBe(seconds);
  });

  it.each(['', '0', '0d', '-1', '1.5h', '1w', '1 d', ' 1d', '1D', 'd', '24856d', '99999999999'])(
    'refuses duration %j',
    (text) => {
      expect(() => parseDuration(text, '--access')).toThrow(/--access/);
    },
  );

  it('reads flags strictly', () => {
    expect(parseFlag('true', '--x')).toBe(true);
    expect(parseFlag('false', '--x')).toBe(false);
    for (const text of ['TRUE', '1', 'yes', 'on', ''])
      expect(() => parseFlag(text, '--x')).toThrow();
  });

  it('reads ISO dates and zoned date-times into UTC, refusing impossible ones', () => {
    expect(parseTimestamp('2026-05-01', '--s')).toBe('2026-05-01T00:00:00.000Z');
    expect(parseTimestamp('2026-05-01T10:00:30.5Z', '--s')).toBe('2026-05-01T10:00:30.500Z');
    expect(parseTimestamp('2026-05-01 10:00-02:00', '--s')).toBe('2026-05-01T12:00:00.000Z');
    expect(parseTimestamp('2024-02-29', '--s')).toBe('2024-02-29T00:00:00.000Z');
    for (const text of [
      '2026-02-30',
      '2026-13-01',
      '2026-05-01T24:00Z',
      '2026-05-01T10:00',
      'tomorrow',
      '1714557600',
    ]) {
      expect(() => parseTimestamp(text, '--s'), text).toThrow(/--s/);
    }
  });
});
