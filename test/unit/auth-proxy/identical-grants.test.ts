import { describe, expect, it } from 'vitest';
import { createIdenticalGrants } from '../../../src/auth-proxy/identical-grants.ts';

/** Whether `promise` has settled by the time the microtasks queued now have run. */
async function settledNow(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(() => (settled = true));
  await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

describe('identical grants in flight', () => {
  const identity = ['acme', 'job', 'stale-password', '_acme-api', ''];

  it('lets the first go on and holds an identical one until the first leaves', async () => {
    const grants = createIdenticalGrants();
    const leaveFirst = await grants.enter(identity);
    const second = grants.enter([...identity]);
    expect(await settledNow(second)).toBe(false);
    leaveFirst();
    expect(await settledNow(second)).toBe(true);
  });

  it('holds no grant of another password, client or one-time password', async () => {
    const grants = createIdenticalGrants();
    await grants.enter(identity);
    for (const other of [
      ['acme', 'job', 'right-password', '_acme-api', ''],
      ['acme', 'job', 'stale-password', 'another-client', ''],
      ['acme', 'job', 'stale-password', '_acme-api', '123456'],
    ]) {
      expect(await settledNow(grants.enter(other))).toBe(true);
    }
  });

  it('makes the next one the grant in flight once the first has left, leaving twice or not', async () => {
    const grants = createIdenticalGrants();
    const leaveFirst = await grants.enter(identity);
    leaveFirst();
    const leaveNext = await grants.enter(identity);
    // The first leaving again does not let the one after the next go on.
    leaveFirst();
    const third = grants.enter(identity);
    expect(await settledNow(third)).toBe(false);
    leaveNext();
    expect(await settledNow(third)).toBe(true);
  });
});
