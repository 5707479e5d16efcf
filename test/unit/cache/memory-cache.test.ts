import { describe, expect, it } from 'vitest';
import { ClaimRefused } from '../../../src/cache/cache.ts';
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

  it('refuses a claim past its bound as a full store, not as a key claimed before', async () => {
    const clock = manualClock(1_000);
    const cache = createMemoryCache({ maxEntries: 2, clock });
    expect(await cache.claim('a', TTL_MS, 'one')).toBe(true);
    expect(await cache.claim('b', TTL_MS, 'two')).toBe(true);
    const refused = cache.claim('c', TTL_MS, 'three');
    await expect(refused).rejects.toBeInstanceOf(ClaimRefused);
    await expect(refused).rejects.toMatchObject({ reason: 'full' });
    // What it holds is still claimed; once it expires, there is room again.
    expect(await cache.claim('a', TTL_MS, 'one')).toBe(false);
    clock.advance(TTL_MS);
    expect(await cache.claim('c', TTL_MS, 'three')).toBe(true);
  });

  it('past half its bound, refuses only the claims of an owner holding more than its share', async () => {
    // 64 claims: the pressure starts at 32, an owner's share is 64 / 16 = 4.
    const clock = manualClock(1_000);
    const cache = createMemoryCache({ maxEntries: 64, clock });
    let taken = 0;
    for (;;) {
      const claimed = await cache
        .claim(`flood-${taken}`, TTL_MS, 'flood')
        .catch((err: unknown) => err);
      if (claimed !== true) {
        expect(claimed).toBeInstanceOf(ClaimRefused);
        expect(claimed).toMatchObject({ reason: 'owner_share' });
        break;
      }
      taken += 1;
    }
    // Alone, it took half the store: every other owner still has the other half.
    expect(taken).toBe(32);
    for (let i = 0; i < 4; i += 1)
      expect(await cache.claim(`calm-${i}`, TTL_MS, 'calm')).toBe(true);
    await expect(cache.claim('calm-4', TTL_MS, 'calm')).rejects.toMatchObject({
      reason: 'owner_share',
    });
    expect(await cache.claim('other-0', TTL_MS, 'other')).toBe(true);
    // A claim refused for its owner's share is never one made before: a replay stays refused.
    expect(await cache.claim('flood-0', TTL_MS, 'flood')).toBe(false);
    // A claim without an owner is bounded by the store alone.
    expect(await cache.claim('anonymous', TTL_MS)).toBe(true);
    // Once its claims expire, the owner claims again.
    clock.advance(TTL_MS);
    expect(await cache.claim(`flood-${taken}`, TTL_MS, 'flood')).toBe(true);
  });

  it('forgets everything on close', async () => {
    const cache = createMemoryCache({ maxEntries: 10 });
    await cache.set('k', 'v', TTL_MS);
    await cache.close();
    expect(await cache.get('k')).toBeUndefined();
  });
});
