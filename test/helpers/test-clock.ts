import type { Clock } from '../../src/time/clock.ts';

/** A clock a test moves forward instead of sleeping. */
export interface TestClock extends Clock {
  /** Moves the clock `ms` forward. */
  advance(ms: number): void;
}

/** Stands still at `start` (epoch ms) until advanced: for unit tests, whose time is all theirs. */
export function manualClock(start = Date.UTC(2026, 10, 23, 12)): TestClock {
  let now = start;
  return {
    now: () => now,
    advance(ms) {
      now += ms;
    },
  };
}

/**
 * Real time plus what the test advanced: for a gateway talking to a real Keycloak, PostgreSQL and
 * Redis, whose own time keeps running. Advanced, the gateway sees its lifetimes pass (cached
 * logins, verified tokens, re-checks) while the services it calls see no jump.
 */
export function aheadClock(): TestClock {
  let ahead = 0;
  return {
    now: () => Date.now() + ahead,
    advance(ms) {
      ahead += ms;
    },
  };
}
