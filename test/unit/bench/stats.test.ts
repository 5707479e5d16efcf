import { describe, expect, it } from 'vitest';
import { median, percentile, summarize } from '../../../bench/stats.ts';

describe('median', () => {
  it('takes the middle value, or the mean of the two middle ones, whatever the order', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([])).toBeUndefined();
  });
});

describe('percentile', () => {
  it('is the nearest rank of sorted values, 0 without any', () => {
    const sorted = Array.from({ length: 200 }, (_, i) => i + 1);
    expect(percentile(sorted, 0.99)).toBe(198);
    expect(percentile(sorted, 0.5)).toBe(100);
    expect(percentile([7], 0.99)).toBe(7);
    expect(percentile([], 0.99)).toBe(0);
  });
});

describe('summarize', () => {
  it("gives the median and the spread of a pair's rounds, nothing without rounds", () => {
    expect(summarize([1.02, 0.97, 1.05, 0.99])).toEqual({ median: 1.005, min: 0.97, max: 1.05 });
    expect(summarize([])).toBeUndefined();
  });
});
