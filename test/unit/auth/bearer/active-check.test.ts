import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AuthFailure } from '../../../../src/auth/auth-failure.ts';
import { createActiveCheck } from '../../../../src/auth/bearer/active-check.ts';
import type { Principal } from '../../../../src/tenancy/principal.ts';
import { testPrincipal } from '../../../helpers/principal.ts';
import { createRevocationList } from '../../../../src/auth/revocation.ts';
import type { TokenClient } from '../../../../src/keycloak/token-client.ts';
import { metricsOff } from '../../../../src/metrics/metrics.ts';

const T0 = Date.parse('2026-11-23T10:00:00.000Z');

const principal: Principal = testPrincipal({ issuedAt: T0 / 1000, expiresAt: T0 / 1000 + 3600 });

interface ScriptedKeycloak {
  active: boolean;
  asked: number[];
  hold: Promise<void> | undefined;
  tokens: TokenClient;
}

/** A scripted Keycloak introspection: its answers, and when it was asked (ms after T0). */
function scriptedKeycloak(): ScriptedKeycloak {
  const keycloak: ScriptedKeycloak = {
    active: true,
    asked: [],
    /** When set, each introspection waits for this promise before it answers. */
    hold: undefined,
    tokens: {
      passwordGrant: () => Promise.reject(new Error('not used here')),
      isActive: async () => {
        keycloak.asked.push(Date.now() - T0);
        await keycloak.hold;
        return keycloak.active;
      },
    },
  };
  return keycloak;
}

/** Counts the re-check events. */
function countedEvents() {
  const events: string[] = [];
  return { events, metrics: { recheck: (event: string) => void events.push(event) } };
}

async function activeCheckOf(
  tokens: TokenClient,
  metrics: { recheck(event: string): void },
  waitMs = 1000,
) {
  const revocations = await createRevocationList({
    keyPrefix: 'unit:',
    metrics: metricsOff,
    logger: pino({ level: 'silent' }),
  });
  const check = createActiveCheck({
    tokens,
    revocations,
    intervalSeconds: 2,
    waitMs,
    basicCacheSeconds: 60,
    metrics,
    logger: pino({ level: 'silent' }),
  });
  return { check, revocations };
}

/** What a request gets: served, or refused (the AuthFailure of a token no longer active). */
async function requestAt(
  check: Awaited<ReturnType<typeof activeCheckOf>>['check'],
  ms: number,
): Promise<'served' | 'refused'> {
  vi.setSystemTime(T0 + ms);
  // At once (nothing, or a throw) when the check knows; a promise when it must ask.
  try {
    await check.ensureActive('token', principal);
    return 'served';
  } catch (err) {
    expect(err).toBeInstanceOf(AuthFailure);
    return 'refused';
  }
}

/**
 * REVOCATION_CHECK_SECONDS as a bound, on an injected clock (vitest's fake `Date` and timers;
 * promises run for real): how late a token Keycloak no longer holds active is refused does not
 * depend on how fast the machine is. Keycloak's answer is scripted; the integration tests
 * (key-rotation.test.ts, refresh-tokens.test.ts) show the same refusal against the real Keycloak.
 */
describe('the re-check of a token (REVOCATION_CHECK_SECONDS=2, REVOCATION_CHECK_WAIT_MS=1000)', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    vi.setSystemTime(T0);
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('asks Keycloak once per 2 s; the request that finds the check due waits and is refused', async () => {
    const keycloak = scriptedKeycloak();
    const { events, metrics } = countedEvents();
    const { check, revocations } = await activeCheckOf(keycloak.tokens, metrics);

    // The first request waits for the first check; the next ones within 2 s ask nothing and
    // need no promise.
    const first = check.ensureActive('token', principal);
    expect(first).toBeInstanceOf(Promise);
    await expect(first).resolves.toBeUndefined();
    keycloak.active = false;
    expect(check.ensureActive('token', principal)).toBeUndefined();
    expect(await requestAt(check, 1)).toBe('served');
    expect(await requestAt(check, 1999)).toBe('served');
    expect(keycloak.asked).toEqual([0]);
    // 2 s on, the check is due: the fast path cannot tell, and the request itself is refused ...
    vi.setSystemTime(T0 + 2000);
    const due = check.ensureActive('token', principal);
    expect(due).toBeInstanceOf(Promise);
    await expect(due).rejects.toBeInstanceOf(AuthFailure);
    expect(keycloak.asked).toEqual([0, 2000]);
    // ... and every later one, on every replica (its session revoked), without asking again.
    expect(await requestAt(check, 2001)).toBe('refused');
    expect(revocations.isSessionRevoked('acme', 's1')).toBe(true);
    expect(keycloak.asked).toEqual([0, 2000]);
    expect(events).toEqual(['queued', 'active', 'queued', 'inactive']);
  });

  it('serves the request after 1 s when Keycloak is slower, counts it late, and applies the late answer', async () => {
    const keycloak = scriptedKeycloak();
    const { events, metrics } = countedEvents();
    const { check } = await activeCheckOf(keycloak.tokens, metrics);
    let answer!: () => void;
    keycloak.hold = new Promise<void>((resolve) => (answer = resolve));
    keycloak.active = false;

    let outcome: string | undefined;
    void requestAt(check, 0).then((result) => (outcome = result));
    // A second request of the same token joins the check running: Keycloak is asked once.
    let second: string | undefined;
    void requestAt(check, 10).then((result) => (second = result));
    await vi.advanceTimersByTimeAsync(999);
    expect(outcome).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(outcome).toBe('served');
    await vi.advanceTimersByTimeAsync(10);
    expect(second).toBe('served');
    expect(keycloak.asked).toEqual([0]);
    expect(events).toEqual(['queued', 'late', 'late']);

    // Keycloak's answer comes later: the token is refused from then on.
    answer();
    await vi.advanceTimersByTimeAsync(0);
    expect(await requestAt(check, 1100)).toBe('refused');
    expect(events).toEqual(['queued', 'late', 'late', 'inactive']);
  });

  it('serves the request when Keycloak cannot be asked, counted failed, and asks again 2 s on', async () => {
    const keycloak = scriptedKeycloak();
    const { events, metrics } = countedEvents();
    const { check } = await activeCheckOf(
      {
        ...keycloak.tokens,
        isActive: (...args) => {
          if (Date.now() - T0 < 2000) return Promise.reject(new Error('connect ECONNREFUSED'));
          return keycloak.tokens.isActive(...args);
        },
      },
      metrics,
    );
    keycloak.active = false;
    expect(await requestAt(check, 0)).toBe('served');
    expect(await requestAt(check, 1999)).toBe('served');
    expect(await requestAt(check, 2000)).toBe('refused');
    expect(events).toEqual(['queued', 'failed', 'queued', 'inactive']);
  });

  it('with REVOCATION_CHECK_WAIT_MS=0, checks in the background: the due request is served', async () => {
    const keycloak = scriptedKeycloak();
    const { events, metrics } = countedEvents();
    const { check } = await activeCheckOf(keycloak.tokens, metrics, 0);
    keycloak.active = false;
    expect(await requestAt(check, 0)).toBe('served');
    await vi.advanceTimersByTimeAsync(0);
    expect(await requestAt(check, 1)).toBe('refused');
    expect(events).toEqual(['queued', 'inactive']);
  });

  it('still checks after the clock steps back (NTP, a VM restored): its cap of 50 a second is not held for the step', async () => {
    const keycloak = scriptedKeycloak();
    const { events, metrics } = countedEvents();
    const { check } = await activeCheckOf(keycloak.tokens, metrics);
    // 50 tokens checked within the second: the cap of the second is reached.
    for (let i = 0; i < 50; i++) {
      await check.ensureActive('token', { ...principal, sessionId: `s${i}` });
    }
    expect(keycloak.asked).toHaveLength(50);
    // Two minutes back: a token seen for the first time is checked, not skipped for two minutes.
    vi.setSystemTime(T0 - 120_000);
    keycloak.active = false;
    const due = check.ensureActive('token', { ...principal, sessionId: 'after-step' });
    await expect(due).rejects.toBeInstanceOf(AuthFailure);
    expect(keycloak.asked).toHaveLength(51);
    expect(events.filter((event) => event === 'skipped')).toEqual([]);
  });
});
