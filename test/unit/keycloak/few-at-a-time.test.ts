import { describe, expect, it } from 'vitest';
import {
  ADMIN_CALLS_AT_ONCE,
  mapFewAtATime,
  someFewAtATime,
} from '../../../src/keycloak/admin-client.ts';

/** Calls that end only when the test ends them, counting how many are in flight together. */
function heldCalls<T>() {
  const waiting: { item: T; end: (result: boolean) => void; fail: (err: Error) => void }[] = [];
  let inFlight = 0;
  let peak = 0;
  const started: T[] = [];
  const call = (item: T) =>
    new Promise<boolean>((resolve, reject) => {
      started.push(item);
      peak = Math.max(peak, ++inFlight);
      const settle = () => (inFlight -= 1);
      waiting.push({
        item,
        end: (result) => resolve((settle(), result)),
        fail: (err) => reject((settle(), err)),
      });
    });
  /** Lets the queued calls start, then hands out the oldest one still waiting. */
  const next = async () => {
    await new Promise((resolve) => setImmediate(resolve));
    return waiting.shift();
  };
  return { call, next, started, peak: () => peak };
}

const items = Array.from({ length: 3 * ADMIN_CALLS_AT_ONCE + 1 }, (_, i) => i);

describe('mapFewAtATime', () => {
  it('keeps at most ADMIN_CALLS_AT_ONCE calls in flight, and answers in the items’ order', async () => {
    const calls = heldCalls<number>();
    const done = mapFewAtATime(items, async (item) => {
      await calls.call(item);
      return item * 2;
    });
    // Ended newest first, so that results arrive out of order.
    for (let call = await calls.next(); call; call = await calls.next()) call.end(false);
    expect(await done).toEqual(items.map((item) => item * 2));
    expect(calls.started).toHaveLength(items.length);
    expect(calls.peak()).toBe(ADMIN_CALLS_AT_ONCE);
  });

  it('starts no call after one fails, and throws that failure', async () => {
    const calls = heldCalls<number>();
    const done = mapFewAtATime(items, (item) => calls.call(item));
    const first = await calls.next();
    first!.fail(new Error('Keycloak answered 500'));
    await expect(done).rejects.toThrow('Keycloak answered 500');
    for (let call = await calls.next(); call; call = await calls.next()) call.end(false);
    expect(calls.started).toHaveLength(ADMIN_CALLS_AT_ONCE);
  });
});

describe('someFewAtATime', () => {
  it('answers true and starts no call once one holds', async () => {
    const calls = heldCalls<number>();
    const done = someFewAtATime(items, (item) => calls.call(item));
    (await calls.next())!.end(false);
    (await calls.next())!.end(true);
    for (let call = await calls.next(); call; call = await calls.next()) call.end(false);
    expect(await done).toBe(true);
    // The first answer (false) let one more start; the second (true) none.
    expect(calls.started).toHaveLength(ADMIN_CALLS_AT_ONCE + 1);
    expect(calls.peak()).toBe(ADMIN_CALLS_AT_ONCE);
  });

  it('answers false once every call has said no', async () => {
    const calls = heldCalls<number>();
    const done = someFewAtATime(items, (item) => calls.call(item));
    for (let call = await calls.next(); call; call = await calls.next()) call.end(false);
    expect(await done).toBe(false);
    expect(calls.started).toHaveLength(items.length);
  });

  it('answers false for no items, with no call', async () => {
    expect(await someFewAtATime([], () => Promise.resolve(true))).toBe(false);
  });
});
