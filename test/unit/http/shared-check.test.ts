import { describe, expect, it } from 'vitest';
import { sharedCheck } from '../../../src/http/health.router.ts';

/** A check whose runs are counted and settled by the test. */
function controlledCheck() {
  const runs: { resolve: () => void; reject: (err: Error) => void }[] = [];
  const check = () =>
    new Promise<void>((resolve, reject) => {
      runs.push({ resolve, reject });
    });
  return { runs, check };
}

describe('sharedCheck', () => {
  it('gives callers the run in flight, then its success for the hold', async () => {
    const { runs, check } = controlledCheck();
    const shared = sharedCheck(check, 60_000);
    const first = shared();
    const second = shared();
    await Promise.resolve();
    expect(runs).toHaveLength(1);
    runs[0]!.resolve();
    await Promise.all([first, second]);
    await shared();
    expect(runs).toHaveLength(1);
  });

  it('holds no failure: the first caller after it asks again, so a dependency back shows at once', async () => {
    const { runs, check } = controlledCheck();
    const shared = sharedCheck(check, 60_000);
    const failed = shared();
    const meanwhile = shared();
    await Promise.resolve();
    runs[0]!.reject(new Error('down'));
    await expect(failed).rejects.toThrow('down');
    await expect(meanwhile).rejects.toThrow('down');
    expect(runs).toHaveLength(1);
    const again = shared();
    await Promise.resolve();
    expect(runs).toHaveLength(2);
    runs[1]!.resolve();
    await expect(again).resolves.toBeUndefined();
  });

  it('keeps its one run while a timed-out check still runs: a slow database is not asked again and again', async () => {
    const { runs, check } = controlledCheck();
    const shared = sharedCheck(check, 60_000);
    await expect(shared()).rejects.toThrow('timeout');
    await expect(shared()).rejects.toThrow('timeout');
    expect(runs).toHaveLength(1);
    runs[0]!.resolve();
    // Every reaction to that settling has run by the next turn of the event loop.
    await new Promise(setImmediate);
    const after = shared();
    await Promise.resolve();
    expect(runs).toHaveLength(2);
    runs[1]!.resolve();
    await expect(after).resolves.toBeUndefined();
  }, 10_000);
});
