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
  it('refuses an account for the rest of the window once it reached its limit', async () => {
    const { throttle, advance } = setup({ perUser: 3, perAddress: 0 });
    for (let i = 0; i < 2; i++) await throttle.failed('org', 'alice', '192.0.2.1');
    expect(await throttle.retryAfter('org', 'alice', '192.0.2.1')).toBe(0);
    await throttle.failed('org', 'ALICE', '192.0.2.2');
    expect(await throttle.retryAfter('org', 'alice', '192.0.2.3')).toBe(300);
    advance(100_000);
    expect(await throttle.retryAfter('org', 'Alice', '192.0.2.3')).toBe(200);
    // Other accounts and realms are unaffected.
    expect(await throttle.retryAfter('org', 'bob', '192.0.2.3')).toBe(0);
    expect(await throttle.retryAfter('other', 'alice', '192.0.2.3')).toBe(0);
    advance(200_001);
    expect(await throttle.retryAfter('org', 'alice', '192.0.2.3')).toBe(0);
  });

  it('refuses an address that failed too often, for every account', async () => {
    const { throttle } = setup({ perUser: 0, perAddress: 4 });
    for (const user of ['a', 'b', 'c', 'd']) await throttle.failed('org', user, '198.51.100.1');
    expect(await throttle.retryAfter('org', 'e', '198.51.100.1')).toBe(300);
    expect(await throttle.retryAfter('org', 'e', '198.51.100.2')).toBe(0);
  });

  it('clears the account count on success, not the address count', async () => {
    const { throttle } = setup({ perUser: 2, perAddress: 3 });
    await throttle.failed('org', 'alice', '192.0.2.1');
    await throttle.failed('org', 'alice', '192.0.2.1');
    expect(await throttle.retryAfter('org', 'alice', '192.0.2.9')).toBe(300);
    await throttle.succeeded('org', 'alice');
    expect(await throttle.retryAfter('org', 'alice', '192.0.2.9')).toBe(0);
    await throttle.failed('org', 'bob', '192.0.2.1');
    expect(await throttle.retryAfter('org', 'carol', '192.0.2.1')).toBe(300);
  });

  it('stores no user name in clear', async () => {
    const { throttle, cache } = setup({ perUser: 2, perAddress: 0 });
    await throttle.failed('org', 'alice', '192.0.2.1');
    expect(await cache.counter('throttle:user:alice')).toBeUndefined();
  });
});
