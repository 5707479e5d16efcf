import { describe, expect, it } from 'vitest';
import { pendingLookups } from '../../../src/audit/realm-log.ts';

/** A promise the test settles: a lookup still running until it does. */
function running<T>(): { lookup: Promise<T>; answer: (value: T) => void } {
  let answer!: (value: T) => void;
  const lookup = new Promise<T>((resolve) => (answer = resolve));
  return { lookup, answer };
}

describe('records waiting for a lookup', () => {
  it('are settled once each is handed on, after the lookup it waits for next too', async () => {
    const pending = pendingLookups();
    const handedOn: string[] = [];
    const token = running<string>();
    const realm = running<boolean>();
    // A refusal's record: its token verified first, then its realm looked up.
    pending.after(token.lookup, (name) =>
      pending.after(realm.lookup, (isLog) => handedOn.push(`${name} ${isLog}`)),
    );
    let settled = false;
    const done = pending.settled().then(() => (settled = true));
    token.answer('nightly-job');
    // Every promise reaction due now has run: the token's record waits for its realm alone.
    await new Promise(setImmediate);
    expect(settled).toBe(false);
    realm.answer(true);
    await done;
    expect(handedOn).toEqual(['nightly-job true']);
  });

  it('are settled at once when none waits', async () => {
    await expect(pendingLookups().settled()).resolves.toBeUndefined();
  });
});
