import { describe, expect, it } from 'vitest';
import {
  toIsoTimestamp,
  toIsoTimestampOrNull,
  toJsonb,
  toStringArray,
} from '../../../src/db/column-values.ts';

describe('toIsoTimestamp', () => {
  it('formats Dates as UTC with milliseconds', () => {
    expect(toIsoTimestamp(new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 6)))).toBe(
      '2026-01-02T03:04:05.006Z',
    );
  });

  it('parses PostgreSQL text timestamps, truncating microseconds', () => {
    expect(toIsoTimestamp('2026-01-02 03:04:05.123456+00')).toBe('2026-01-02T03:04:05.123Z');
    expect(toIsoTimestamp('2026-01-02 03:04:05+02')).toBe('2026-01-02T01:04:05.000Z');
    expect(toIsoTimestamp('2026-01-02 03:04:05-05:30')).toBe('2026-01-02T08:34:05.000Z');
    expect(toIsoTimestamp('2026-01-02T03:04:05.120Z')).toBe('2026-01-02T03:04:05.120Z');
  });

  it('rejects values that are not timestamps', () => {
    expect(() => toIsoTimestamp('yesterday')).toThrow(TypeError);
    expect(() => toIsoTimestamp(42)).toThrow(TypeError);
    expect(() => toIsoTimestamp(null)).toThrow(TypeError);
  });
});

describe('toIsoTimestampOrNull', () => {
  it('keeps SQL NULL', () => {
    expect(toIsoTimestampOrNull(null)).toBeNull();
    expect(toIsoTimestampOrNull('2026-01-02 03:04:05+00')).toBe('2026-01-02T03:04:05.000Z');
  });
});

describe('jsonb arrays', () => {
  it('reads parsed and unparsed arrays alike', () => {
    expect(toStringArray(['dev', 'prod'])).toEqual(['dev', 'prod']);
    expect(toStringArray('["dev","prod"]')).toEqual(['dev', 'prod']);
    expect(() => toStringArray('{"a":1}')).toThrow(TypeError);
  });

  it('round-trips through toJsonb', () => {
    expect(toStringArray(toJsonb(['é', '✓']))).toEqual(['é', '✓']);
  });
});
