import { describe, expect, it } from 'vitest';
import { createFailedLoginMemory, type LoginCredentials } from '../../../src/auth/failed-logins.ts';
import type { Cache } from '../../../src/cache/cache.ts';
import { createMemoryCache } from '../../../src/cache/memory-cache.ts';
import { manualClock } from '../../helpers/test-clock.ts';

function setup() {
  const clock = manualClock(5_000_000);
  const memoryCache = createMemoryCache({ maxEntries: 1000, clock });
  const written: string[] = [];
  // Every key and value written, to show that no user name or password is among them.
  const cache: Cache = {
    ...memoryCache,
    set: (key, value, ttlMs) => {
      written.push(key, value);
      return memoryCache.set(key, value, ttlMs);
    },
    increment: (key, windowMs, by) => {
      written.push(key);
      return memoryCache.increment(key, windowMs, by);
    },
  };
  const memory = createFailedLoginMemory({
    cache,
    secret: 'test-secret-of-16-chars',
    windowSeconds: 300,
    clock,
  });
  return { memory, written, advance: (ms: number) => clock.advance(ms) };
}

const stale: LoginCredentials = {
  channel: 'basic',
  realm: 'org',
  username: 'alice',
  password: 'the-password-before-rotation',
};

describe('failed-login memory', () => {
  it('remembers a refused login for the window: counted the first time only', async () => {
    const { memory, advance } = setup();
    expect(await memory.recall(stale)).toBeUndefined();
    expect(await memory.remember(stale, 'wrong_password')).toBe(true);
    expect(await memory.remember(stale, 'wrong_password')).toBe(false);
    // Keycloak reads user names case-insensitively and trimmed.
    expect(await memory.recall({ ...stale, username: ' ALICE' })).toBe('wrong_password');
    advance(299_000);
    expect(await memory.recall(stale)).toBe('wrong_password');
    advance(1_001);
    expect(await memory.recall(stale)).toBeUndefined();
    expect(await memory.remember(stale, 'wrong_password')).toBe(true);
  });

  it('another password, realm, channel, client or one-time password is another login', async () => {
    const { memory } = setup();
    const grant: LoginCredentials = { ...stale, channel: 'grant', extra: ['_org-api', ''] };
    await memory.remember(stale, 'wrong_password');
    await memory.remember(grant, '{"status":401}');
    expect(await memory.recall({ ...stale, password: 'another' })).toBeUndefined();
    expect(await memory.recall({ ...stale, realm: 'other' })).toBeUndefined();
    expect(await memory.recall({ ...stale, username: 'bob' })).toBeUndefined();
    expect(await memory.recall(grant)).toBe('{"status":401}');
    expect(await memory.recall({ ...grant, extra: ['_org-api', '123456'] })).toBeUndefined();
    expect(await memory.recall({ ...grant, extra: ['other-client', ''] })).toBeUndefined();
  });

  it("a success with a password new to the account drops the account's remembered failures", async () => {
    const { memory, advance } = setup();
    // A job tried the password an administrator sets later.
    const early = { ...stale, password: 'next-password' };
    await memory.remember(early, 'wrong_password');
    await memory.remember(stale, 'wrong_password');
    advance(1);
    await memory.succeeded({ ...stale, channel: 'grant', password: 'next-password' });
    expect(await memory.recall(early)).toBeUndefined();
    expect(await memory.recall(stale)).toBeUndefined();
    // The stale job fails again: remembered and counted once more, then answered from memory.
    advance(1);
    expect(await memory.remember(stale, 'wrong_password')).toBe(true);
    expect(await memory.remember(stale, 'wrong_password')).toBe(false);
    // Further successes with the same password keep it: the stale job costs nothing more.
    advance(1);
    await memory.succeeded({ ...stale, password: 'next-password' });
    expect(await memory.recall(stale)).toBe('wrong_password');
  });

  it("a password set through the gateway drops the account's remembered failures at once", async () => {
    const { memory, advance } = setup();
    // A job tried the password an administrator then sets through the API.
    const early = { ...stale, password: 'next-password' };
    await memory.remember(early, 'wrong_password');
    await memory.remember({ ...early, username: 'bob' }, 'wrong_password');
    advance(1);
    await memory.passwordSet('org', ' Alice');
    expect(await memory.recall(early)).toBeUndefined();
    // Another account keeps its own.
    expect(await memory.recall({ ...early, username: 'bob' })).toBe('wrong_password');
    // The stale job's next failure is remembered and counted again, once.
    advance(1);
    expect(await memory.remember(stale, 'wrong_password')).toBe(true);
    expect(await memory.remember(stale, 'wrong_password')).toBe(false);
  });

  it('stores no user name or password, in keys or values', async () => {
    const { memory, written } = setup();
    await memory.remember(stale, 'wrong_password');
    await memory.succeeded({ ...stale, password: 'right-password' });
    expect(written.length).toBeGreaterThan(0);
    for (const text of written) {
      expect(text).not.toMatch(/alice|password-before|right-password/);
    }
  });
});
