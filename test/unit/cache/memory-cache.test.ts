import { describe, expect, it } from 'vitest';
import { createMemoryCache } from '../../../src/cache/memory-cache.ts';
import { manualClock } from '../../helpers/test-clock.ts';

const TTL_MS = 60_000;

describe('createMemoryCache', () => {
  it('evicts the oldest entry beyond maxEntries', async () => {
    const cache = createMemoryCache({ maxEntries: 2 });
    await cache.set('a', '1', TTL_MS);
    await cache.set('b', '2', TTL_MS);
    await cache.set('c', '3', TTL_MS);
    expect(await cache.get('a')).toBeUndefined();
    expect(await cache.get('b')).toBe('2');
    expect(await cache.get('c')).toBe('3');
  });

  it('treats a read as use, evicting the least recently used entry instead', async () => {
    const cache = createMemoryCache({ maxEntries: 2 });
    await cache.set('a', '1', TTL_MS);
    await cache.set('b', '2', TTL_MS);
    expect(await cache.get('a')).toBe('1');
    await cache.set('c', '3', TTL_MS);
    expect(await cache.get('b')).toBeUndefined();
    expect(await cache.get('a')).toBe('1');
    expect(await cache.get('c')).toBe('3');
  });

  it('treats an overwrite as use without growing the cache', async () => {
    const cache = createMemoryCache({ maxEntries: 2 });
    await cache.set('a', '1', TTL_MS);
    await cache.set('b', '2', TTL_MS);
    await cache.set('a', '1bis', TTL_MS);
    await cache.set('c', '3', TTL_MS);
    expect(await cache.get('b')).toBeUndefined();
    expect(await cache.get('a')).toBe('1bis');
    expect(await cache.get('c')).toBe('3');
  });

  it('holds exactly maxEntries entries', async () => {
    const cache = createMemoryCache({ maxEntries: 3 });
    for (let i = 0; i < 10; i += 1) await cache.set(`k${i}`, `v${i}`, TTL_MS);
    const present = [];
    for (let i = 0; i < 10; i += 1) present.push(await cache.get(`k${i}`));
    expect(present).toEqual([...Array<undefined>(7).fill(undefined), 'v7', 'v8', 'v9']);
  });

  it('expires entries by the injected clock', async () => {
    const clock = manualClock(1_000);
    const cache = createMemoryCache({ maxEntries: 10, clock });
    await cache.set('k', 'v', 100);
    clock.advance(99);
    expect(await cache.get('k')).toBe('v');
    clock.advance(1);
    expect(await cache.get('k')).toBeUndefined();
  });

  it('rejects a maxEntries below one', () => {
    expect(() => createMemoryCache({ maxEntries: 0 })).toThrow(RangeError);
    expect(() => createMemoryCache({ maxEntries: 1.5 })).toThrow(RangeError);
  });

  it('forgets everything on close', async () => {
    const cache = createMemoryCache({ maxEntries: 10 });
    await cache.set('k', 'v', TTL_MS);
    await cache.close();
    expect(await cache.get('k')).toBeUndefined();
  });
});
