import { describe, expect, it } from 'vitest';
import { createLoginThrottle } from '../../../src/auth/basic/login-throttle.ts';
import { createMemoryCache } from '../../../src/cache/memory-cache.ts';

function setup(limits: { perUser: number; perAddress: number }) {
  let clock = 5_000_000;
  const cache = createMemoryCache({ maxEntries: 1000, now: () => clock });
  const throttle = createLoginThrottle({
    cache,
    secret: 'test-secret-of-16-chars',
    maxFailuresPerUser: limits.perUser,
    maxFailuresPerAddress: limits.perAddress,
    windowSeconds: 300,
  });
  return { throttle, cache, advance: (ms: number) => (clock += ms) };
}

describe('login throttle', () => {
  it('lets `limit` attempts of an account through per window, then says how long to wait', async () => {
    const { throttle, advance } = setup({ perUser: 3, perAddress: 0 });
    expect(await throttle.begin('org', 'alice', '192.0.2.1')).toBe(0);
    expect(await throttle.begin('org', 'ALICE', '192.0.2.2')).toBe(0);
    expect(await throttle.begin('org', 'Alice', '192.0.2.3')).toBe(0);
    expect(await throttle.begin('org', 'alice', '192.0.2.4')).toBe(300);
    advance(100_000);
    expect(await throttle.begin('org', 'alice', '192.0.2.4')).toBe(200);
    // Other accounts and realms are unaffected.
    expect(await throttle.begin('org', 'bob', '192.0.2.4')).toBe(0);
    expect(await throttle.begin('other', 'alice', '192.0.2.4')).toBe(0);
    advance(200_001);
    expect(await throttle.begin('org', 'alice', '192.0.2.4')).toBe(0);
  });

  it('counts attempts before they are made: of a concurrent burst only `limit` go on', async () => {
    const { throttle } = setup({ perUser: 3, perAddress: 0 });
    const waits = await Promise.all(
      Array.from({ length: 200 }, () => throttle.begin('org', 'alice', '192.0.2.1')),
    );
    expect(waits.filter((wait) => wait === 0)).toHaveLength(3);
  });

  it('refuses an address that failed too often, for every account', async () => {
    const { throttle } = setup({ perUser: 0, perAddress: 4 });
    for (const user of ['a', 'b', 'c', 'd']) {
      expect(await throttle.begin('org', user, '198.51.100.1')).toBe(0);
    }
    expect(await throttle.begin('org', 'e', '198.51.100.1')).toBe(300);
    expect(await throttle.begin('org', 'e', '198.51.100.2')).toBe(0);
  });

  it('a success clears the account and takes its attempt back from the address', async () => {
    const { throttle } = setup({ perUser: 2, perAddress: 3 });
    await throttle.begin('org', 'alice', '192.0.2.1');
    await throttle.begin('org', 'alice', '192.0.2.1');
    await throttle.settle('org', 'alice', '192.0.2.1', 'succeeded');
    // Two more for alice are allowed again; the address has one failure and now two more.
    expect(await throttle.begin('org', 'alice', '192.0.2.1')).toBe(0);
    expect(await throttle.begin('org', 'alice', '192.0.2.1')).toBe(0);
    expect(await throttle.begin('org', 'bob', '192.0.2.1')).toBe(300);
  });

  it('an attempt Keycloak could not answer does not count', async () => {
    const { throttle } = setup({ perUser: 1, perAddress: 1 });
    for (let i = 0; i < 5; i++) {
      expect(await throttle.begin('org', 'alice', '192.0.2.1')).toBe(0);
      await throttle.settle('org', 'alice', '192.0.2.1', 'unanswered');
    }
  });

  it('reports once per window when an account or an address first goes past its limit', async () => {
    let clock = 5_000_000;
    const reached: string[] = [];
    const throttle = createLoginThrottle({
      cache: createMemoryCache({ maxEntries: 100, now: () => clock }),
      secret: 'test-secret-of-16-chars',
      maxFailuresPerUser: 2,
      maxFailuresPerAddress: 3,
      windowSeconds: 300,
      onLimitReached: ({ scope, username, address }) =>
        reached.push(`${scope} ${scope === 'account' ? username : address}`),
    });
    for (let i = 0; i < 6; i++) await throttle.begin('org', 'alice', '192.0.2.1');
    expect(reached).toEqual(['account alice', 'address 192.0.2.1']);
    clock += 300_001;
    for (let i = 0; i < 3; i++) await throttle.begin('org', 'alice', '192.0.2.1');
    expect(reached).toEqual(['account alice', 'address 192.0.2.1', 'account alice']);
  });

  it('stores no user name in clear', async () => {
    const { throttle, cache } = setup({ perUser: 2, perAddress: 0 });
    await throttle.begin('org', 'alice', '192.0.2.1');
    expect(await cache.counter('throttle:user:alice')).toBeUndefined();
  });
});
