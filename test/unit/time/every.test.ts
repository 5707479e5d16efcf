import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { every } from '../../../src/time/every.ts';

/** A task whose runs end when the test says. */
function heldTask() {
  const ends: (() => void)[] = [];
  let fail = false;
  const task = vi.fn(
    () =>
      new Promise<void>((resolve, reject) => {
        ends.push(fail ? () => reject(new Error('refused')) : resolve);
      }),
  );
  return {
    task,
    endRun: async () => {
      ends.shift()!();
      await vi.advanceTimersByTimeAsync(0);
    },
    failNext: () => (fail = true),
  };
}

describe('every', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('runs after the first delay, then an interval after each run ends, never two at once', async () => {
    const { task, endRun } = heldTask();
    const periodic = every(1000, task, { onError: () => undefined, firstMs: 5000 });
    await vi.advanceTimersByTimeAsync(4999);
    expect(task).toHaveBeenCalledTimes(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(task).toHaveBeenCalledTimes(1);
    // A slow run: no second one meanwhile.
    await vi.advanceTimersByTimeAsync(10_000);
    expect(task).toHaveBeenCalledTimes(1);
    await endRun();
    await vi.advanceTimersByTimeAsync(1000);
    expect(task).toHaveBeenCalledTimes(2);
    await endRun();
    await periodic.stop();
  });

  it('tells a failed run and runs again; stop waits for the run in progress and ends it all', async () => {
    const { task, endRun, failNext } = heldTask();
    const errors: unknown[] = [];
    const periodic = every(1000, task, { onError: (err) => errors.push(err) });
    await vi.advanceTimersByTimeAsync(1000);
    failNext();
    await vi.advanceTimersByTimeAsync(0);
    // The first run was started before failNext: it succeeds; the second fails.
    await endRun();
    await vi.advanceTimersByTimeAsync(1000);
    await endRun();
    expect(errors).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1000);
    expect(task).toHaveBeenCalledTimes(3);
    let stopped = false;
    const stopping = periodic.stop().then(() => (stopped = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(stopped).toBe(false);
    await endRun();
    await stopping;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(task).toHaveBeenCalledTimes(3);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('keeps no timer after a stop before the first run', async () => {
    const task = vi.fn(() => Promise.resolve());
    await every(1000, task, { onError: () => undefined }).stop();
    await vi.advanceTimersByTimeAsync(5000);
    expect(task).not.toHaveBeenCalled();
    expect(vi.getTimerCount()).toBe(0);
  });
});
