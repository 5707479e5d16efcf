/**
 * The time every rule with a lifetime reads: caches, throttles, re-checks, lockouts, cached
 * logins, key-set refreshes, revocation times. The wiring (src/gateway.ts) gives each the one
 * clock of the process, the system's unless a caller passes another, so tests move time forward
 * by advancing a clock of their own instead of sleeping.
 */
export interface Clock {
  /** Epoch milliseconds. */
  now(): number;
}

/** The system's wall clock. */
export const systemClock: Clock = { now: () => Date.now() };
