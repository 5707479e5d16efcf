/**
 * A timer that strikes after a time of inactivity, for a rule that waits on something outside
 * the process (an upstream's silence). The system's unless a caller passes another, so a test
 * strikes it when it chooses instead of sleeping until it does.
 */
export interface Timer {
  /** Starts the wait again from now. */
  refresh(): unknown;
  /** Stops it for good. */
  close(): unknown;
}

/** Starts a timer that calls `strike` after `ms` without a `refresh`. */
export type StartTimer = (ms: number, strike: () => void) => Timer;

/** The system's timers (Node's `Timeout` has both methods: nothing allocated beside it). */
export const systemTimer: StartTimer = (ms, strike) => setTimeout(strike, ms);
