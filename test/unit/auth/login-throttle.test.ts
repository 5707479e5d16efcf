import { describe, expect, it } from 'vitest';
import { createLoginThrottle } from '../../../src/auth/login-throttle.ts';
import { createMemoryCache } from '../../../src/cache/memory-cache.ts';

function setup(limits: { perPair: number; perAddress: number }) {
  let clock = 5_000_000;
  const cache = createMemoryCache({ maxEntries: 1000, now: () => clock });
  const throttle = createLoginThrottle({
    cache,
    secret: 'test-secret-of-16-chars',
    maxFailuresPerUserAndAddress: limits.perPair,
    maxFailuresPerAddress: limits.perAddress,
    windowSeconds: 300,
  });
  return { throttle, cache, advance: (ms: number) => (clock += ms) };
}

describe('login throttle', () => {
  it('lets `limit` attempts of an account from one address through per window, then says how long to wait', async () => {
    const { throttle, advance } = setup({ perPair: 3, perAddress: 0 });
    expect(await throttle.begin('org', 'alice', '192.0.2.1')).toBe(0);
    expect(await throttle.begin('org', 'ALICE', '192.0.2.1')).toBe(0);
    expect(await throttle.begin('ORG', ' Alice ', '192.0.2.1')).toBe(0);
    expect(await throttle.begin('org', 'alice', '192.0.2.1')).toBe(300);
    advance(100_000);
    expect(await throttle.begin('org', 'alice', '192.0.2.1')).toBe(200);
    // Other accounts and realms are unaffected.
    expect(await throttle.begin('org', 'bob', '192.0.2.1')).toBe(0);
    expect(await throttle.begin('other', 'alice', '192.0.2.1')).toBe(0);
    advance(200_001);
    expect(await throttle.begin('org', 'alice', '192.0.2.1')).toBe(0);
  });

  it('one address never locks the account for another address', async () => {
    const { throttle } = setup({ perPair: 3, perAddress: 0 });
    for (let i = 0; i < 40; i++) await throttle.begin('org', 'alice', '192.0.2.66');
    expect(await throttle.begin('org', 'alice', '192.0.2.66')).toBe(300);
    expect(await throttle.begin('org', 'alice', '192.0.2.7')).toBe(0);
    expect(await throttle.begin('org', 'alice', '2001:db8::7')).toBe(0);
  });

  it('counts attempts before they are made: of a concurrent burst only `limit` go on', async () => {
    const { throttle } = setup({ perPair: 3, perAddress: 0 });
    const waits = await Promise.all(
      Array.from({ length: 200 }, () => throttle.begin('org', 'alice', '192.0.2.1')),
    );
    expect(waits.filter((wait) => wait === 0)).toHaveLength(3);
  });

  it('refuses an address that failed too often, for every account, and only that address', async () => {
    const { throttle } = setup({ perPair: 0, perAddress: 4 });
    for (const user of ['a', 'b', 'c', 'd']) {
      expect(await throttle.begin('org', user, '198.51.100.1')).toBe(0);
    }
    expect(await throttle.begin('org', 'e', '198.51.100.1')).toBe(300);
    expect(await throttle.begin('org', 'e', '198.51.100.2')).toBe(0);
  });

  it('a success clears the pair and takes its attempt back from the address', async () => {
    const { throttle } = setup({ perPair: 2, perAddress: 3 });
    await throttle.begin('org', 'alice', '192.0.2.1');
    await throttle.begin('org', 'alice', '192.0.2.1');
    await throttle.settle('org', 'alice', '192.0.2.1', 'succeeded');
    // Two more for alice are allowed again; the address has one failure and now two more.
    expect(await throttle.begin('org', 'alice', '192.0.2.1')).toBe(0);
    expect(await throttle.begin('org', 'alice', '192.0.2.1')).toBe(0);
    expect(await throttle.begin('org', 'bob', '192.0.2.1')).toBe(300);
  });

  it('a success from one address clears that pair only', async () => {
    const { throttle } = setup({ perPair: 2, perAddress: 0 });
    for (let i = 0; i < 3; i++) await throttle.begin('org', 'alice', '192.0.2.66');
    await throttle.begin('org', 'alice', '192.0.2.7');
    await throttle.settle('org', 'alice', '192.0.2.7', 'succeeded');
    expect(await throttle.begin('org', 'alice', '192.0.2.66')).toBe(300);
  });

  it('an attempt Keycloak could not answer does not count', async () => {
    const { throttle } = setup({ perPair: 1, perAddress: 1 });
    for (let i = 0; i < 5; i++) {
      expect(await throttle.begin('org', 'alice', '192.0.2.1')).toBe(0);
      await throttle.settle('org', 'alice', '192.0.2.1', 'unanswered');
    }
  });

  it('reports once per window when a pair or an address first goes past its limit', async () => {
    let clock = 5_000_000;
    const reached: string[] = [];
    const throttle = createLoginThrottle({
      cache: createMemoryCache({ maxEntries: 100, now: () => clock }),
      secret: 'test-secret-of-16-chars',
      maxFailuresPerUserAndAddress: 2,
      maxFailuresPerAddress: 3,
      windowSeconds: 300,
      onLimitReached: ({ scope, username, address }) =>
        reached.push(
          `${scope} ${scope === 'account_address' ? `${username}@${address}` : address}`,
        ),
    });
    for (let i = 0; i < 6; i++) await throttle.begin('org', 'alice', '192.0.2.1');
    expect(reached).toEqual(['account_address alice@192.0.2.1', 'address 192.0.2.1']);
    clock += 300_001;
    for (let i = 0; i < 3; i++) await throttle.begin('org', 'alice', '192.0.2.1');
    expect(reached).toEqual([
      'account_address alice@192.0.2.1',
      'address 192.0.2.1',
      'account_address alice@192.0.2.1',
    ]);
  });

  it('stores no user name in clear', async () => {
    const { throttle, cache } = setup({ perPair: 2, perAddress: 0 });
    await throttle.begin('org', 'alice', '192.0.2.1');
    for (const key of ['throttle:user:alice', 'throttle:pair:alice', 'throttle:pair:org']) {
      expect(await cache.counter(key)).toBeUndefined();
    }
  });
});
