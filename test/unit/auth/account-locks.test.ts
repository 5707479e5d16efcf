import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/http/logger.ts';
import {
  createAccountLocks,
  LOCK_TRUSTED_MS,
  MAX_LOCKED_ACCOUNTS,
  MAX_NOTED_MS,
  type LoginBlock,
} from '../../../src/auth/account-locks.ts';
import { manualClock } from '../../helpers/test-clock.ts';

/**
 * The lockouts Keycloak's admin API told on refusals, kept in process on an injected clock: until
 * when, per realm and account, and bounded. The admin API is a stub: this is about the keeping.
 */
describe("the memory of Keycloak's lockouts", () => {
  const logger = createLogger('silent');
  const SECRET = 'a-secret-of-the-test';

  function locksTelling(answer: (realm: string, username: string) => LoginBlock) {
    const clock = manualClock();
    const asked: string[] = [];
    const locks = createAccountLocks({
      loginBlockOf: (realm, username) => {
        asked.push(`${realm}/${username}`);
        return Promise.resolve(answer(realm, username));
      },
      secret: SECRET,
      logger,
      clock,
    });
    return { clock, asked, locks };
  }

  it('notes a lock until the end Keycloak told, for the account in any case, in its realm only', async () => {
    const { clock, locks } = locksTelling(() => ({
      twoFactor: false,
      lockedOut: true,
      lockedUntil: Date.UTC(2026, 10, 23, 12) + 60_000,
    }));
    expect(await locks.blockOf('acme', 'Alice')).toMatchObject({ lockedOut: true });
    expect(locks.isLocked('acme', ' alice')).toBe(true);
    expect(locks.isLocked('ACME', 'alice')).toBe(false);
    expect(locks.isLocked('acme', 'bob')).toBe(false);
    clock.advance(60_000 - 1);
    expect(locks.isLocked('acme', 'alice')).toBe(true);
    clock.advance(1);
    expect(locks.isLocked('acme', 'alice')).toBe(false);
  });

  it('answers a refusal while a noted lock lasts without asking the admin API again', async () => {
    const { clock, asked, locks } = locksTelling(() => ({
      twoFactor: false,
      lockedOut: true,
      lockedUntil: Date.UTC(2026, 10, 23, 12) + 60_000,
    }));
    await locks.blockOf('acme', 'alice');
    expect(await locks.blockOf('acme', 'Alice')).toEqual({ twoFactor: false, lockedOut: true });
    expect(asked).toEqual(['acme/alice']);
    clock.advance(60_000);
    await locks.blockOf('acme', 'alice');
    expect(asked).toEqual(['acme/alice', 'acme/alice']);
  });

  it('tells the first refusal of each login while the lock lasts, a repeat not, each after it again', async () => {
    const { clock, locks } = locksTelling(() => ({
      twoFactor: false,
      lockedOut: true,
      lockedUntil: Date.UTC(2026, 10, 23, 12) + 60_000,
    }));
    const login = { channel: 'basic' as const, realm: 'acme', username: 'alice', password: 'p' };
    // No lock noted: every refusal counts.
    expect(locks.firstRefusal(login)).toBe(true);
    expect(locks.firstRefusal(login)).toBe(true);
    await locks.blockOf('acme', 'alice');
    expect(locks.firstRefusal(login)).toBe(true);
    expect(locks.firstRefusal({ ...login, username: 'Alice' })).toBe(false);
    expect(locks.firstRefusal({ ...login, password: 'q' })).toBe(true);
    expect(locks.firstRefusal({ ...login, channel: 'grant', extra: ['cli', ''] })).toBe(true);
    clock.advance(60_000);
    expect(locks.firstRefusal(login)).toBe(true);
    expect(locks.firstRefusal(login)).toBe(true);
  });

  it('notes a lock with no end, or a far one, for MAX_NOTED_MS at most', async () => {
    const { clock, locks } = locksTelling(() => ({
      twoFactor: false,
      lockedOut: true,
      lockedUntil: Number.MAX_SAFE_INTEGER,
    }));
    await locks.blockOf('acme', 'alice');
    clock.advance(MAX_NOTED_MS - 1);
    expect(locks.isLocked('acme', 'alice')).toBe(true);
    clock.advance(1);
    expect(locks.isLocked('acme', 'alice')).toBe(false);
  });

  it('notes nothing of a lock without an end, or an answer of no lock', async () => {
    const now = Date.UTC(2026, 10, 23, 12);
    const answers: LoginBlock[] = [
      { twoFactor: false, lockedOut: true },
      { twoFactor: false, lockedOut: false, lockedUntil: now + 60_000 },
    ];
    const { locks } = locksTelling(() => answers.shift()!);
    for (let i = 0; i < 2; i++) {
      await locks.blockOf('acme', 'alice');
      expect(locks.isLocked('acme', 'alice')).toBe(false);
    }
  });

  it("notes a lock Keycloak still tells, its end past on a clock ahead of Keycloak's, for LOCK_TRUSTED_MS", async () => {
    // Keycloak judges the end on its own clock: to a replica ahead of it by more than the lock's
    // remainder, the end told has passed while Keycloak still locks. Unnoted, each refusal would
    // cost a grant and two admin calls, and a repeat of the right password would count again.
    const { clock, asked, locks } = locksTelling(() => ({
      twoFactor: false,
      lockedOut: true,
      lockedUntil: Date.UTC(2026, 10, 23, 12) - 30_000,
    }));
    const login = { channel: 'basic' as const, realm: 'acme', username: 'alice', password: 'p' };
    expect(await locks.blockOf('acme', 'alice')).toMatchObject({ lockedOut: true });
    expect(locks.isLocked('acme', 'alice')).toBe(true);
    expect(locks.firstRefusal(login)).toBe(true);
    expect(locks.firstRefusal(login)).toBe(false);
    clock.advance(LOCK_TRUSTED_MS - 1);
    expect(await locks.blockOf('acme', 'alice')).toMatchObject({ lockedOut: true });
    expect(asked).toEqual(['acme/alice']);
    // Trusted no longer: the next refusal reads the status again, which still tells the lock.
    clock.advance(1);
    expect(locks.isLocked('acme', 'alice')).toBe(false);
    expect(await locks.blockOf('acme', 'alice')).toMatchObject({ lockedOut: true });
    expect(asked).toEqual(['acme/alice', 'acme/alice']);
    expect(locks.isLocked('acme', 'alice')).toBe(true);
  });

  it('forgets a lock that ended early (a login succeeded, the user unlocked)', async () => {
    const { locks } = locksTelling(() => ({
      twoFactor: false,
      lockedOut: true,
      lockedUntil: Date.UTC(2026, 10, 23, 12) + 60_000,
    }));
    await locks.blockOf('acme', 'alice');
    locks.ended('acme', 'Alice');
    expect(locks.isLocked('acme', 'alice')).toBe(false);
  });

  it('takes an admin API that cannot tell for no block', async () => {
    const locks = createAccountLocks({
      loginBlockOf: () => Promise.reject(new Error('admin API down')),
      secret: SECRET,
      logger,
      clock: manualClock(),
    });
    expect(await locks.blockOf('acme', 'alice')).toEqual({ twoFactor: false, lockedOut: false });
    expect(locks.isLocked('acme', 'alice')).toBe(false);
  });

  it('keeps a noted lock through a read again that the admin API cannot answer', async () => {
    // A failed read is no unlock: were the lock forgotten, a right password Keycloak refuses
    // meanwhile would be taken for a wrong one and remembered past the lock's end.
    const clock = manualClock();
    const until = clock.now() + 60_000;
    let down = false;
    const locks = createAccountLocks({
      loginBlockOf: () =>
        down
          ? Promise.reject(new Error('admin API down'))
          : Promise.resolve({ twoFactor: false, lockedOut: true, lockedUntil: until }),
      secret: SECRET,
      logger,
      clock,
    });
    await locks.blockOf('acme', 'alice');
    down = true;
    clock.advance(LOCK_TRUSTED_MS);
    expect(await locks.blockOf('acme', 'alice')).toMatchObject({ lockedOut: true });
    expect(locks.isLocked('acme', 'alice')).toBe(true);
    clock.advance(60_000 - LOCK_TRUSTED_MS);
    expect(locks.isLocked('acme', 'alice')).toBe(false);
  });

  it('keeps MAX_LOCKED_ACCOUNTS accounts at most, the least recently told going first', async () => {
    const { locks } = locksTelling(() => ({
      twoFactor: false,
      lockedOut: true,
      lockedUntil: Date.UTC(2026, 10, 23, 12) + 60_000,
    }));
    for (let i = 0; i <= MAX_LOCKED_ACCOUNTS; i++) await locks.blockOf('acme', `user-${i}`);
    expect(locks.isLocked('acme', 'user-0')).toBe(false);
    expect(locks.isLocked('acme', `user-${MAX_LOCKED_ACCOUNTS}`)).toBe(true);
  });

  it('asks the admin API again once a noted lock was trusted LOCK_TRUSTED_MS, once for concurrent refusals', async () => {
    const answers: LoginBlock[] = [
      { twoFactor: false, lockedOut: true, lockedUntil: Date.UTC(2026, 10, 23, 12) + 600_000 },
      { twoFactor: false, lockedOut: false },
    ];
    const { clock, asked, locks } = locksTelling(() => answers.shift()!);
    await locks.blockOf('acme', 'alice');
    clock.advance(LOCK_TRUSTED_MS - 1);
    expect(await locks.blockOf('acme', 'alice')).toMatchObject({ lockedOut: true });
    expect(asked).toEqual(['acme/alice']);
    clock.advance(1);
    // Lifted early: the next refusals learn it, with one call between them.
    const blocks = await Promise.all([
      locks.blockOf('acme', 'alice'),
      locks.blockOf('acme', 'Alice'),
    ]);
    expect(blocks).toEqual([
      { twoFactor: false, lockedOut: false },
      { twoFactor: false, lockedOut: false },
    ]);
    expect(asked).toEqual(['acme/alice', 'acme/alice']);
    expect(locks.isLocked('acme', 'alice')).toBe(false);
  });
});
