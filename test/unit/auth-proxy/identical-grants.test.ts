import { afterEach, describe, expect, it, vi } from 'vitest';
import { createIdenticalGrants, type GrantTurn } from '../../../src/auth-proxy/identical-grants.ts';

/** Whether `promise` has settled by the time the microtasks queued now have run. */
async function settledNow(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(() => (settled = true));
  await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

const MAX_WAIT_MS = 60_000;

/** The turn of a grant that is the one in flight, to leave. */
async function flying(entered: Promise<GrantTurn>) {
  const turn = await entered;
  if (turn.kind !== 'inFlight') throw new Error(`the grant's turn is ${turn.kind}`);
  return turn;
}
const stays = () => new AbortController().signal;

describe('identical grants in flight', () => {
  const identity = ['acme', 'job', 'stale-password', '_acme-api', ''];
  afterEach(() => vi.useRealTimers());

  it('lets the first go on and holds an identical one until the first leaves with an answer', async () => {
    const grants = createIdenticalGrants({ maxWaitMs: MAX_WAIT_MS });
    const first = await flying(grants.enter(identity, stays()));
    const second = grants.enter([...identity], stays());
    expect(await settledNow(second)).toBe(false);
    first.leave(true);
    expect((await second).kind).toBe('answered');
  });

  it('holds no grant of another password, client or one-time password', async () => {
    const grants = createIdenticalGrants({ maxWaitMs: MAX_WAIT_MS });
    await grants.enter(identity, stays());
    for (const other of [
      ['acme', 'job', 'right-password', '_acme-api', ''],
      ['acme', 'job', 'stale-password', 'another-client', ''],
      ['acme', 'job', 'stale-password', '_acme-api', '123456'],
    ]) {
      expect((await grants.enter(other, stays())).kind).toBe('inFlight');
    }
  });

  it('makes the next one the grant in flight once the first has left, leaving twice or not', async () => {
    const grants = createIdenticalGrants({ maxWaitMs: MAX_WAIT_MS });
    const first = await flying(grants.enter(identity, stays()));
    first.leave(true);
    const next = await flying(grants.enter(identity, stays()));
    // The first leaving again does not let the one after the next go on.
    first.leave(true);
    const third = grants.enter(identity, stays());
    expect(await settledNow(third)).toBe(false);
    next.leave(true);
    expect(await settledNow(third)).toBe(true);
  });

  it('the first leaving without an answer to share makes one waiting grant the one in flight, the others wait on it', async () => {
    const grants = createIdenticalGrants({ maxWaitMs: MAX_WAIT_MS });
    const first = await flying(grants.enter(identity, stays()));
    const waiting = [1, 2, 3].map(() => grants.enter(identity, stays()));
    first.leave(false);
    const next = await flying(waiting[0]!);
    expect(await settledNow(waiting[1]!)).toBe(false);
    expect(await settledNow(waiting[2]!)).toBe(false);
    next.leave(false);
    const after = await flying(waiting[1]!);
    expect(await settledNow(waiting[2]!)).toBe(false);
    after.leave(true);
    expect((await waiting[2]!).kind).toBe('answered');
  });

  it('a waiting grant whose client leaves stops waiting, and is never made the one in flight', async () => {
    const grants = createIdenticalGrants({ maxWaitMs: MAX_WAIT_MS });
    const first = await flying(grants.enter(identity, stays()));
    const client = new AbortController();
    const gone = grants.enter(identity, client.signal);
    const later = grants.enter(identity, stays());
    client.abort();
    expect((await gone).kind).toBe('gone');
    first.leave(false);
    expect((await later).kind).toBe('inFlight');
  });

  it('a grant whose client has already left takes no turn', async () => {
    const grants = createIdenticalGrants({ maxWaitMs: MAX_WAIT_MS });
    const client = new AbortController();
    client.abort();
    expect((await grants.enter(identity, client.signal)).kind).toBe('gone');
    expect((await grants.enter(identity, stays())).kind).toBe('inFlight');
  });

  it('a grant waits no longer than its bound', async () => {
    vi.useFakeTimers();
    const grants = createIdenticalGrants({ maxWaitMs: MAX_WAIT_MS });
    const first = await flying(grants.enter(identity, stays()));
    const second = grants.enter(identity, stays());
    await vi.advanceTimersByTimeAsync(MAX_WAIT_MS - 1);
    let turn: GrantTurn | undefined;
    void second.then((t) => (turn = t));
    await vi.advanceTimersByTimeAsync(0);
    expect(turn).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(turn?.kind).toBe('overdue');
    // Still the first's: an identical grant waits on it.
    const third = grants.enter(identity, stays());
    await vi.advanceTimersByTimeAsync(0);
    let thirdTurn: GrantTurn | undefined;
    void third.then((t) => (thirdTurn = t));
    await vi.advanceTimersByTimeAsync(0);
    expect(thirdTurn).toBeUndefined();
    first.leave(true);
    await vi.advanceTimersByTimeAsync(0);
    expect(thirdTurn?.kind).toBe('answered');
  });
});
