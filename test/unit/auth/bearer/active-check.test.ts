import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AuthFailure } from '../../../../src/auth/auth-failure.ts';
import { createActiveCheck } from '../../../../src/auth/bearer/active-check.ts';
import type { Principal } from '../../../../src/tenancy/principal.ts';
import { createRevocationList } from '../../../../src/auth/revocation.ts';
import type { TokenClient } from '../../../../src/keycloak/token-client.ts';
import { metricsOff } from '../../../../src/metrics/metrics.ts';

const T0 = Date.parse('2026-11-23T10:00:00.000Z');

const principal: Principal = {
  realm: 'acme',
  userId: 'u1',
  username: 'alice',
  realmRoles: [],
  clientRoles: {},
  locale: undefined,
  method: 'bearer',
  sessionId: 's1',
  issuedAt: T0 / 1000,
  expiresAt: T0 / 1000 + 3600,
};

/** Lets a check started in the background run to its end (its steps are promise callbacks). */
const backgroundDone = () => new Promise((resolve) => setImmediate(resolve));

/**
 * REVOCATION_CHECK_SECONDS as a bound, on an injected clock (`Date` only; promises and I/O run
 * for real): how late a token Keycloak no longer holds active is refused does not depend on how
 * fast the machine is. Keycloak's answer is scripted; refresh-tokens.test.ts shows the same
 * refusal against the real Keycloak.
 */
describe('the background re-check of a token (REVOCATION_CHECK_SECONDS=2)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(T0);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('asks Keycloak once per 2 s, and refuses the token from the answer on that says inactive', async () => {
    let active = true;
    /** When Keycloak was asked, in ms after T0. */
    const asked: number[] = [];
    const tokens: TokenClient = {
      passwordGrant: () => Promise.reject(new Error('not used here')),
      isActive: () => {
        asked.push(Date.now() - T0);
        return Promise.resolve(active);
      },
    };
    const revocations = await createRevocationList({
      keyPrefix: 'unit:',
      metrics: metricsOff,
      logger: pino({ level: 'silent' }),
    });
    const check = createActiveCheck({
      tokens,
      revocations,
      intervalSeconds: 2,
      basicCacheSeconds: 60,
      metrics: metricsOff,
      logger: pino({ level: 'silent' }),
    });
    const at = async (ms: number) => {
      vi.setSystemTime(T0 + ms);
      const servable = check.servable('token', principal);
      await backgroundDone();
      return servable;
    };

    // The first request is served and starts a check; the next ones within 2 s ask nothing.
    expect(await at(0)).toBe(true);
    active = false;
    expect(await at(1)).toBe(true);
    expect(await at(1999)).toBe(true);
    expect(asked).toEqual([0]);
    // 2 s on, a request is still served (no request waits for Keycloak) and starts the check ...
    expect(await at(2000)).toBe(true);
    expect(asked).toEqual([0, 2000]);
    // ... whose answer refuses the token from then on, on every replica (its session revoked),
    // without asking again.
    expect(await at(2001)).toBe(false);
    await expect(check.ensureActive('token', principal)).rejects.toBeInstanceOf(AuthFailure);
    expect(revocations.isSessionRevoked('s1')).toBe(true);
    expect(asked).toEqual([0, 2000]);
  });
});
