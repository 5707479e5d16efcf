import { describe, expect, it } from 'vitest';
import {
  createLoginThrottle,
  type LoginThrottleOptions,
  type ThrottleDecision,
} from '../../../src/auth/login-throttle.ts';
import { createMemoryCache } from '../../../src/cache/memory-cache.ts';
import { manualClock } from '../../helpers/test-clock.ts';

const ATTEMPT_MAX_MS = 30_000;

/**
 * A throttle on an in-process cache with one injected clock. Waiting attempts pause on
 * `passTime`, which moves the clock and wakes them, so no test sleeps.
 */
function setup(
  limits: { perPair: number; perAddress: number },
  more: Partial<LoginThrottleOptions> = {},
) {
  const clock = manualClock(5_000_000);
  let paused: (() => void)[] = [];
  const cache = createMemoryCache({ maxEntries: 10_000, clock });
  const throttle = createLoginThrottle({
    cache,
    secret: 'test-secret-of-16-chars',
    maxFailuresPerUserAndAddress: limits.perPair,
    maxFailuresPerAddress: limits.perAddress,
    windowSeconds: 300,
    waitMs: 5000,
    attemptMaxMs: ATTEMPT_MAX_MS,
    clock,
    pause: () => new Promise((resolve) => paused.push(resolve)),
    ...more,
  });
  const settled = () => new Promise((resolve) => setImmediate(resolve));
  return {
    throttle,
    cache,
    advance: (ms: number) => clock.advance(ms),
    /** Moves the clock and lets every waiting attempt look again. */
    passTime: async (ms: number) => {
      clock.advance(ms);
      const waking = paused;
      paused = [];
      for (const wake of waking) wake();
      await settled();
    },
    settled,
  };
}

/** Starts attempts and collects their decisions as they come. */
function burst(count: number, start: (i: number) => Promise<ThrottleDecision>) {
  const decisions: ThrottleDecision[] = [];
  const all = Promise.all(
    Array.from({ length: count }, (_, i) =>
      start(i).then((decision) => {
        decisions.push(decision);
        return decision;
      }),
    ),
  );
  return { decisions, all };
}

const go = (decision: ThrottleDecision) => {
  if (decision.kind !== 'go') throw new Error(`expected go, got ${JSON.stringify(decision)}`);
  return decision.attempt;
};

describe('login throttle', () => {
  it('counts failures, not attempts: any number of logins that succeed go on', async () => {
    const { throttle } = setup({ perPair: 3, perAddress: 5 });
    for (let i = 0; i < 20; i++) {
      await go(await throttle.begin('org', 'alice', '192.0.2.1')).settle('succeeded');
    }
    for (let i = 0; i < 20; i++) {
      await go(await throttle.begin('org', 'alice', '192.0.2.1')).settle('released');
    }
  });

  it('12 concurrent right logins with a limit of 5: 5 go at once, the others wait for them and go too', async () => {
    const { throttle, settled } = setup({ perPair: 5, perAddress: 100 });
    const { decisions, all } = burst(12, () => throttle.begin('org', 'alice', '192.0.2.1'));
    await settled();
    expect(decisions.map((d) => d.kind)).toEqual(['go', 'go', 'go', 'go', 'go']);
    // Each success wakes the waiters of this process at once, without a pause.
    let done = 0;
    while (done < 12) {
      await settled();
      const ready = decisions.slice(done);
      done = decisions.length;
      await Promise.all(ready.map((d) => go(d).settle('succeeded')));
    }
    expect((await all).every((d) => d.kind === 'go')).toBe(true);
  });

  it('a concurrent burst of wrong passwords: only the limit go on; the rest are refused once those failures are there', async () => {
    const { throttle, settled } = setup({ perPair: 3, perAddress: 100 });
    const { decisions, all } = burst(200, () => throttle.begin('org', 'alice', '192.0.2.1'));
    await settled();
    expect(decisions).toHaveLength(3);
    await Promise.all(decisions.slice(0, 3).map((d) => go(d).settle('failed')));
    const final = await all;
    expect(final.filter((d) => d.kind === 'go')).toHaveLength(3);
    expect(final.filter((d) => d.kind === 'refused')).toHaveLength(197);
    expect(decisions.at(-1)).toEqual({
      kind: 'refused',
      scope: 'account_address',
      retryAfter: 300,
    });
  });

  it('the address limit holds a burst over many accounts, and names the address', async () => {
    const { throttle, settled } = setup({ perPair: 5, perAddress: 4 });
    const { decisions, all } = burst(50, (i) => throttle.begin('org', `user-${i}`, '192.0.2.9'));
    await settled();
    expect(decisions).toHaveLength(4);
    await Promise.all(decisions.slice(0, 4).map((d) => go(d).settle('failed')));
    const final = await all;
    expect(final.filter((d) => d.kind === 'go')).toHaveLength(4);
    expect(decisions.at(-1)).toEqual({ kind: 'refused', scope: 'address', retryAfter: 300 });
    expect((await throttle.begin('org', 'user-0', '192.0.2.10')).kind).toBe('go');
  });

  it('counts the addresses of one IPv6 /64 as one client: a new address per guess gets no new budget', async () => {
    const { throttle } = setup({ perPair: 3, perAddress: 5 });
    // One host owns its /64: each guess from another address of it.
    const address = (i: number) => `2001:db8:1:2::${(i + 1).toString(16)}`;
    for (let i = 0; i < 3; i++) {
      await go(await throttle.begin('org', 'alice', address(i))).settle('failed');
    }
    expect(await throttle.begin('org', 'alice', address(3))).toMatchObject({
      kind: 'refused',
      scope: 'account_address',
    });
    for (let i = 3; i < 5; i++) {
      await go(await throttle.begin('org', `user-${i}`, address(i))).settle('failed');
    }
    expect(await throttle.begin('org', 'bob', address(9))).toMatchObject({
      kind: 'refused',
      scope: 'address',
    });
    // Another /64 is another client; an IPv4-mapped address is its IPv4 address.
    expect((await throttle.begin('org', 'alice', '2001:db8:1:3::1')).kind).toBe('go');
    for (let i = 0; i < 5; i++) {
      await go(await throttle.begin('org', `v4-${i}`, '192.0.2.44')).settle('failed');
    }
    expect(await throttle.begin('org', 'carol', '::ffff:192.0.2.44')).toMatchObject({
      kind: 'refused',
      scope: 'address',
    });
  });

  it('refuses at once once the failures are there, for the rest of the window; other accounts and realms go on', async () => {
    const { throttle, advance } = setup({ perPair: 3, perAddress: 0 });
    for (let i = 0; i < 3; i++) {
      await go(await throttle.begin('org', 'alice', '192.0.2.1')).settle('failed');
    }
    // User names are case-insensitive and trimmed, as Keycloak reads them.
    expect(await throttle.begin('ORG', ' Alice ', '192.0.2.1')).toEqual({
      kind: 'refused',
      scope: 'account_address',
      retryAfter: 300,
    });
    advance(100_000);
    expect(await throttle.begin('org', 'alice', '192.0.2.1')).toMatchObject({ retryAfter: 200 });
    expect((await throttle.begin('org', 'bob', '192.0.2.1')).kind).toBe('go');
    expect((await throttle.begin('other', 'alice', '192.0.2.1')).kind).toBe('go');
    expect((await throttle.begin('org', 'alice', '2001:db8::7')).kind).toBe('go');
    advance(200_001);
    expect((await throttle.begin('org', 'alice', '192.0.2.1')).kind).toBe('go');
  });

  it('attempts in flight past the wait bound, failures below the limit: busy, not refused', async () => {
    const { throttle, settled, passTime } = setup({ perPair: 2, perAddress: 0 });
    const held = [
      go(await throttle.begin('org', 'alice', '192.0.2.1')),
      go(await throttle.begin('org', 'alice', '192.0.2.1')),
    ];
    const { decisions } = burst(3, () => throttle.begin('org', 'alice', '192.0.2.1'));
    await passTime(4_900);
    expect(decisions).toEqual([]);
    await passTime(100);
    await settled();
    expect(decisions).toEqual(Array.from({ length: 3 }, () => ({ kind: 'busy', retryAfter: 30 })));
    await Promise.all(held.map((attempt) => attempt.settle('succeeded')));
    expect((await throttle.begin('org', 'alice', '192.0.2.1')).kind).toBe('go');
  });

  it('a reservation never settled (its replica died) frees itself within two attempt lifetimes', async () => {
    const { throttle, advance } = setup({ perPair: 2, perAddress: 0 }, { waitMs: 0 });
    await throttle.begin('org', 'alice', '192.0.2.1');
    await throttle.begin('org', 'alice', '192.0.2.1');
    expect((await throttle.begin('org', 'alice', '192.0.2.1')).kind).toBe('busy');
    advance(2 * ATTEMPT_MAX_MS);
    expect((await throttle.begin('org', 'alice', '192.0.2.1')).kind).toBe('go');
  });

  it('an attempt settled late, after its reservation expired, gives nothing back twice', async () => {
    const { throttle, advance } = setup({ perPair: 1, perAddress: 0 }, { waitMs: 0 });
    const late = go(await throttle.begin('org', 'alice', '192.0.2.1'));
    advance(2 * ATTEMPT_MAX_MS);
    const next = go(await throttle.begin('org', 'alice', '192.0.2.1'));
    await late.settle('released');
    expect((await throttle.begin('org', 'alice', '192.0.2.1')).kind).toBe('busy');
    await next.settle('released');
    expect((await throttle.begin('org', 'alice', '192.0.2.1')).kind).toBe('go');
  });

  it('at a slot boundary, an attempt whose reservation reaches the cache after a later one still sees that one', async () => {
    const clock = manualClock(5_000_000);
    const cache = createMemoryCache({ maxEntries: 1000, clock });
    // One replica's first counter write is held back, as a slower connection would.
    let landLate: (() => void) | undefined;
    const lateCache = {
      ...cache,
      async increment(...args: Parameters<typeof cache.increment>) {
        if (!landLate) await new Promise<void>((resolve) => (landLate = resolve));
        return cache.increment(...args);
      },
    };
    const options = {
      secret: 'test-secret-of-16-chars',
      maxFailuresPerUserAndAddress: 1,
      maxFailuresPerAddress: 0,
      windowSeconds: 300,
      waitMs: 0,
      attemptMaxMs: ATTEMPT_MAX_MS,
      clock,
    };
    const slow = createLoginThrottle({ ...options, cache: lateCache });
    const fast = createLoginThrottle({ ...options, cache });
    clock.advance(ATTEMPT_MAX_MS - (clock.now() % ATTEMPT_MAX_MS) - 1);
    const early = slow.begin('org', 'alice', '192.0.2.1');
    await new Promise((resolve) => setImmediate(resolve));
    clock.advance(1);
    expect((await fast.begin('org', 'alice', '192.0.2.1')).kind).toBe('go');
    landLate!();
    expect((await early).kind).toBe('busy');
  });

  it('a success clears the pair; the address keeps its failures', async () => {
    const { throttle } = setup({ perPair: 2, perAddress: 3 });
    await go(await throttle.begin('org', 'alice', '192.0.2.1')).settle('failed');
    await go(await throttle.begin('org', 'alice', '192.0.2.1')).settle('succeeded');
    // Alice starts again from 0 (two more failures allowed); the address is at 3.
    await go(await throttle.begin('org', 'alice', '192.0.2.1')).settle('failed');
    await go(await throttle.begin('org', 'alice', '192.0.2.1')).settle('failed');
    expect(await throttle.begin('org', 'bob', '192.0.2.1')).toMatchObject({
      kind: 'refused',
      scope: 'address',
    });
  });

  it('an attempt naming no account counts against its address only, and is refused by it', async () => {
    const { throttle } = setup({ perPair: 2, perAddress: 3 });
    // Past the pair limit's 2: no pair is counted, so only the address's 3 bounds it.
    for (let i = 0; i < 3; i++) {
      await go(await throttle.begin('org', undefined, '192.0.2.1')).settle('failed');
    }
    expect(await throttle.begin('org', undefined, '192.0.2.1')).toMatchObject({
      kind: 'refused',
      scope: 'address',
    });
    expect(await throttle.begin('org', 'alice', '192.0.2.1')).toMatchObject({
      kind: 'refused',
      scope: 'address',
    });
  });

  it('reports once per window when the failures of a pair or an address reach its limit', async () => {
    const reached: string[] = [];
    const { throttle, advance } = setup(
      { perPair: 2, perAddress: 3 },
      {
        waitMs: 0,
        onLimitReached: ({ scope, username, address }) =>
          reached.push(
            `${scope} ${scope === 'account_address' ? `${username}@${address}` : address}`,
          ),
      },
    );
    const fail = async (user: string) => {
      const decision = await throttle.begin('org', user, '192.0.2.1');
      if (decision.kind === 'go') await decision.attempt.settle('failed');
    };
    for (let i = 0; i < 4; i++) await fail('alice');
    await fail('bob');
    expect(reached).toEqual(['account_address alice@192.0.2.1', 'address 192.0.2.1']);
    advance(300_001);
    for (let i = 0; i < 2; i++) await fail('alice');
    expect(reached).toHaveLength(3);
  });

  it('stores no user name in clear', async () => {
    const { throttle, cache } = setup({ perPair: 2, perAddress: 0 });
    await go(await throttle.begin('org', 'alice', '192.0.2.1')).settle('failed');
    for (const key of ['throttle:user:alice', 'throttle:pair:alice', 'throttle:pair:org']) {
      expect(await cache.counter(key)).toBeUndefined();
    }
  });
});
