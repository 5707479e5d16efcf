import { describe, expect, it } from 'vitest';
import { createChangeSlots } from '../../../src/platform/change-slots.ts';

/** A piece of work that runs until `end()`; `started` says whether it began. */
function heldWork() {
  let end!: () => void;
  const ended = new Promise<void>((resolve) => (end = resolve));
  const work = { started: false, end, run: () => ((work.started = true), ended) };
  return work;
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

describe('createChangeSlots', () => {
  it('runs at most its size at once, the others in order as slots free', async () => {
    const slots = createChangeSlots(2);
    const works = [heldWork(), heldWork(), heldWork(), heldWork()];
    const done = works.map((work) => slots(work.run));
    await turn();
    expect(works.map((w) => w.started)).toEqual([true, true, false, false]);

    works[1]!.end();
    await turn();
    expect(works.map((w) => w.started)).toEqual([true, true, true, false]);

    works[0]!.end();
    works[2]!.end();
    await turn();
    expect(works[3]!.started).toBe(true);
    works[3]!.end();
    await Promise.all(done);
  });

  it('frees the slot of a work that failed', async () => {
    const slots = createChangeSlots(1);
    await expect(slots(() => Promise.reject(new Error('no')))).rejects.toThrow('no');
    await expect(slots(() => Promise.resolve('next'))).resolves.toBe('next');
  });
});
