import { describe, expect, it } from 'vitest';
import { createLookupBudget } from '../../../src/edge/lookup-budget.ts';
import { manualClock } from '../../helpers/test-clock.ts';

const LIMITS = { perSecond: 10, clientPerSecond: 4, keptForOthers: 2, maxClients: 100 };

const takes = (take: () => boolean, times: number) =>
  Array.from({ length: times }, take).filter(Boolean).length;

describe('createLookupBudget', () => {
  it("gives a client its share, then the others' spare down to what is kept for them", () => {
    const budget = createLookupBudget(LIMITS, manualClock());
    expect(takes(() => budget.take('192.0.2.1'), 20)).toBe(8);
    expect(takes(() => budget.take('192.0.2.2'), 20)).toBe(2);
  });

  it('comes back with time', () => {
    const clock = manualClock();
    const budget = createLookupBudget(LIMITS, clock);
    expect(takes(() => budget.take(undefined), 20)).toBe(10);
    clock.advance(500);
    expect(takes(() => budget.take(undefined), 20)).toBe(5);
  });

  it('is not emptied by the clock stepping back (NTP, a VM restored), and refills from there', () => {
    const clock = manualClock();
    const budget = createLookupBudget(LIMITS, clock);
    // The buckets were made, and used, before the step.
    expect(budget.take('192.0.2.1')).toBe(true);
    expect(budget.take(undefined)).toBe(true);
    clock.advance(-120_000);
    // Nothing was spent but the two: the client and the replica have all the rest.
    expect(takes(() => budget.take('192.0.2.1'), 3)).toBe(3);
    expect(takes(() => budget.take(undefined), 20)).toBe(5);
    clock.advance(1000);
    expect(takes(() => budget.take('192.0.2.1'), 20)).toBe(8);
  });
});
