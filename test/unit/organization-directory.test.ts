import { describe, expect, it } from 'vitest';
import { createOrganizationDirectory } from '../../src/platform/organization-directory.ts';

/** A repository that knows `real` and counts its lookups, with a clock the test moves. */
function setup(real: string[]) {
  let clock = 1_000_000;
  const calls: string[] = [];
  const repo = {
    find: (id: string) => {
      calls.push(id);
      return Promise.resolve(real.includes(id) ? { id } : undefined);
    },
  };
  const directory = createOrganizationDirectory(repo as never, () => clock);
  return { directory, calls, advance: (ms: number) => (clock += ms) };
}

describe('organization directory', () => {
  it('confirms a real organization once and knows it without the database for a minute', async () => {
    const { directory, calls, advance } = setup(['acme']);
    expect(directory.isKnown('acme')).toBe(false);
    expect(await directory.exists('acme')).toBe(true);
    expect(directory.isKnown('acme')).toBe(true);
    advance(59_000);
    expect(await directory.exists('acme')).toBe(true);
    expect(calls).toEqual(['acme']);
    advance(2_000);
    expect(directory.isKnown('acme')).toBe(false);
    expect(await directory.exists('acme')).toBe(true);
    expect(calls).toEqual(['acme', 'acme']);
  });

  it('remembers an unknown id for five seconds', async () => {
    const { directory, calls, advance } = setup([]);
    expect(await directory.exists('nope')).toBe(false);
    expect(await directory.exists('nope')).toBe(false);
    expect(calls).toEqual(['nope']);
    advance(5_001);
    expect(await directory.exists('nope')).toBe(false);
    expect(calls).toEqual(['nope', 'nope']);
  });

  it('reaches the database at a bounded rate under a flood of random ids', async () => {
    const { directory, calls, advance } = setup(['acme']);
    await directory.exists('acme');
    for (let second = 0; second < 3; second++) {
      const answers = await Promise.all(
        Array.from({ length: 5_000 }, (_, i) => directory.exists(`flood-${second}-${i}`)),
      );
      expect(answers.every((answer) => answer === false)).toBe(true);
      advance(1_000);
    }
    // One lookup for acme, then at most the burst plus the refill of each second.
    expect(calls.length).toBeLessThanOrEqual(1 + 50 * 3);
    expect(calls.length).toBeGreaterThanOrEqual(1 + 50);
  });

  it('never loses a real organization to a flood: 20,000 unknown ids later it is still served', async () => {
    const { directory, advance } = setup(['acme']);
    expect(await directory.exists('acme')).toBe(true);
    for (let i = 0; i < 20_000; i++) await directory.exists(`flood-${i}`);
    expect(directory.isKnown('acme')).toBe(true);
    // Gone stale while the lookup budget is spent: still served, without the database.
    advance(61_000);
    for (let i = 0; i < 200; i++) await directory.exists(`late-${i}`);
    expect(await directory.exists('acme')).toBe(true);
  });

  it('merges concurrent lookups of one id into one database call', async () => {
    const { directory, calls } = setup(['acme']);
    const answers = await Promise.all([1, 2, 3].map(() => directory.exists('acme')));
    expect(answers).toEqual([true, true, true]);
    expect(calls).toEqual(['acme']);
  });
});
