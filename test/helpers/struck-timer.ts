import type { StartTimer } from '../../src/time/timer.ts';

/**
 * A silence timer the test strikes itself (forward's `startTimer`, src/time/timer.ts), instead
 * of waiting for a real one: `strike` fires the last one started, and says false when that one
 * was closed (its exchange settled) or none was started.
 */
export function struckByHand(): { start: StartTimer; strike: () => boolean } {
  let fire: (() => void) | undefined;
  const start: StartTimer = (_ms, strike) => {
    fire = strike;
    return { refresh: () => {}, close: () => (fire = undefined) };
  };
  const strike = () => {
    if (!fire) return false;
    fire();
    return true;
  };
  return { start, strike };
}
