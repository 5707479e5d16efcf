import { describe, expect, it, vi } from 'vitest';
import { createBasicAuthenticator } from '../../../../src/auth/basic/basic-authenticator.ts';
import { createFailedLoginMemory } from '../../../../src/auth/failed-logins.ts';
import type { ReservedAttempt, ThrottleDecision } from '../../../../src/auth/login-throttle.ts';
import type { TokenClient } from '../../../../src/keycloak/token-client.ts';
import { createMemoryCache } from '../../../../src/cache/memory-cache.ts';
import { settledBasicDeps } from '../../../helpers/basic-deps.ts';

/** Resolves once `open` is called. */
function gate(): { gate: Promise<void>; open(): void } {
  let open = () => {};
  const gate = new Promise<void>((resolve) => (open = resolve));
  return { gate, open };
}

/**
 * The login lock makes one grant of identical Basic logins from several hosts (one replica, or
 * several sharing Redis). A host whose login was decided for its own address only after the
 * holder's refusal was remembered and its lock released (a slow machine: its throttle decision
 * waited) must find that refusal, not ask Keycloak again: each such grant is one more failure in
 * Keycloak's brute-force count, which locks the account for its right jobs.
 */
describe('Basic login lock', () => {
  it('refuses from memory a login whose lock came after an identical refusal was remembered', async () => {
    const cache = createMemoryCache({ maxEntries: 1000 });
    const failedLogins = createFailedLoginMemory({
      cache,
      secret: 'test-secret-of-16-chars',
      windowSeconds: 300,
    });
    const grants: string[] = [];
    const tokens: TokenClient = {
      passwordGrant: (_realm, username) => {
        grants.push(username);
        return Promise.resolve({
          ok: false,
          error: 'invalid_grant',
          description: 'Invalid user credentials',
        });
      },
      isActive: () => Promise.reject(new Error('not asked')),
    };
    // Host B's throttle decision waits until the test lets it go (its budget held meanwhile).
    const hostB = gate();
    const settled: string[] = [];
    const go = (address: string): ThrottleDecision => {
      const attempt: ReservedAttempt = {
        settle: (outcome) => {
          settled.push(`${address} ${outcome}`);
          return Promise.resolve();
        },
      };
      return { kind: 'go', attempt };
    };
    const begin = vi.fn(async (_realm: string, _user: string | undefined, address: string) => {
      if (address === '198.51.100.20') await hostB.gate;
      return go(address);
    });
    const basic = createBasicAuthenticator({
      ...settledBasicDeps(),
      tokens,
      cache,
      failedLogins,
      accounts: { accountOf: (_realm, name) => Promise.resolve({ account: name }) },
      throttle: { begin },
      refuses: () => false,
    });
    const stale = { username: 'alice', password: 'the-password-before-rotation' };
    const fromB = Promise.resolve(basic.authenticate('org', stale, '198.51.100.20')).catch(
      (err: unknown) => err,
    );
    // B has looked for a remembered refusal (none yet) and waits for its throttle decision.
    await vi.waitFor(() => expect(begin).toHaveBeenCalledTimes(1));
    const fromA = await Promise.resolve(basic.authenticate('org', stale, '203.0.113.10')).catch(
      (err: unknown) => err,
    );
    expect(fromA).toMatchObject({ reason: 'wrong_password' });
    expect(grants).toEqual(['alice']);
    // A's refusal is remembered and its login lock released: only now is B let through.
    hostB.open();
    expect(await fromB).toMatchObject({ reason: 'wrong_password' });
    expect(grants).toEqual(['alice']);
    // B's refusal was A's, counted once (on A's address); B's reservation is given back.
    expect(settled).toEqual(['203.0.113.10 failed', '198.51.100.20 released']);
  });
});
