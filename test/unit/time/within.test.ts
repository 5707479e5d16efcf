import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { within } from '../../../src/time/within.ts';

/** A promise the test settles. */
function held<T>() {
  let resolve!: (value: T) => void;
  let reject!: (err: Error) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

describe('within', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it("answers the work's outcome in time, and leaves no timer behind", async () => {
    const work = held<string>();
    const late = vi.fn(() => 'late');
    const answer = within(work.promise, 1000, late);
    work.resolve('answer');
    await expect(answer).resolves.toBe('answer');
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(2000);
    expect(late).not.toHaveBeenCalled();
  });

  it("passes the work's failure in time on", async () => {
    const work = held<string>();
    const answer = within(work.promise, 1000, () => 'late');
    work.reject(new Error('refused'));
    await expect(answer).rejects.toThrow('refused');
  });

  it("answers late's value once the time is up; the work's later failure is no one's", async () => {
    const work = held<string>();
    const answer = within(work.promise, 1000, () => 'late');
    await vi.advanceTimersByTimeAsync(999);
    let settled = false;
    void answer.then(() => (settled = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await expect(answer).resolves.toBe('late');
    const unhandled = vi.fn();
    process.on('unhandledRejection', unhandled);
    try {
      work.reject(new Error('refused after'));
      await vi.advanceTimersByTimeAsync(0);
      await vi.advanceTimersByTimeAsync(0);
      expect(unhandled).not.toHaveBeenCalled();
    } finally {
      process.off('unhandledRejection', unhandled);
    }
  });

  it('rejects with what late throws once the time is up', async () => {
    const work = held<string>();
    const answer = within(work.promise, 500, () => {
      throw new Error('no answer within 500 ms');
    });
    const seen = expect(answer).rejects.toThrow('no answer within 500 ms');
    await vi.advanceTimersByTimeAsync(500);
    await seen;
  });
});
