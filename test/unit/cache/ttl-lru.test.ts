import { describe, expect, it } from 'vitest';
import { TtlLru } from '../../../src/cache/ttl-lru.ts';
import { manualClock } from '../../helpers/test-clock.ts';

const LATER = Number.MAX_SAFE_INTEGER;

describe('TtlLru', () => {
  it('keeps an entry read on every request among the newest, however many come after it', () => {
    const lru = new TtlLru<number>(8);
    lru.set('hot', 0, LATER);
    for (let i = 1; i <= 100; i += 1) {
      expect(lru.get('hot')).toBe(0);
      lru.set(`cold-${i}`, i, LATER);
    }
    expect(lru.size).toBe(8);
    expect(lru.get('cold-92')).toBeUndefined();
    expect(lru.get('cold-100')).toBe(100);
  });

  it('leaves an entry read within the newest quarter where it is, and moves an older one', () => {
    const lru = new TtlLru<number>(8);
    for (let i = 1; i <= 8; i += 1) lru.set(`e${i}`, i, LATER);
    // e7 is 1 placement behind the newest (within 8 / 4 = 2): it stays where it is.
    expect(lru.get('e7')).toBe(7);
    // e1 is 7 behind: moved to the newest end, so e2 is now the oldest.
    expect(lru.get('e1')).toBe(1);
    lru.set('e9', 9, LATER);
    expect(lru.get('e2')).toBeUndefined();
    expect(lru.get('e1')).toBe(1);
    expect(lru.get('e7')).toBe(7);
  });

  it('drops an expired entry on read', () => {
    const clock = manualClock(1_000);
    const lru = new TtlLru<string>(4, clock);
    lru.set('a', 'x', 2_000);
    expect(lru.get('a')).toBe('x');
    clock.advance(1_000);
    expect(lru.get('a')).toBeUndefined();
    expect(lru.size).toBe(0);
  });
});
