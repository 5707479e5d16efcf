import { describe, expect, it } from 'vitest';
import { createOrganizationDirectory } from '../../../src/platform/organization-directory.ts';
import { manualClock } from '../../helpers/test-clock.ts';

/**
 * A repository that knows `real` (enabled) and `disabled`, and counts its lookups, with a clock
 * the test moves.
 */
function setup(real: string[], disabled: string[] = []) {
  const clock = manualClock(1_000_000);
  const calls: string[] = [];
  /** Set to make every lookup fail as an unreachable database does. */
  const database = { down: false };
  const repo = {
    find: (id: string) => {
      calls.push(id);
      if (database.down) {
        return Promise.reject(
          Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
        );
      }
      if (disabled.includes(id)) return Promise.resolve({ id, enabled: false });
      return Promise.resolve(real.includes(id) ? { id, enabled: true } : undefined);
    },
  };
  const directory = createOrganizationDirectory(repo as never, clock);
  return { directory, calls, database, advance: (ms: number) => clock.advance(ms) };
}

describe('organization directory', () => {
  it('confirms a real organization once and knows it without the database for a minute', async () => {
    const { directory, calls, advance } = setup(['acme']);
    // Not known yet: the answer is the database's, a promise.
    const first = directory.stateOf('acme');
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toBe('enabled');
    // Known: answered at once, without a promise.
    expect(directory.stateOf('acme')).toBe('enabled');
    advance(59_000);
    expect(directory.stateOf('acme')).toBe('enabled');
    expect(calls).toEqual(['acme']);
    advance(2_000);
    const again = directory.stateOf('acme');
    expect(again).toBeInstanceOf(Promise);
    expect(await again).toBe('enabled');
    expect(calls).toEqual(['acme', 'acme']);
  });

  it('serves an organization confirmed within the hour while the database cannot be asked', async () => {
    const { directory, calls, database, advance } = setup(['acme'], ['frozen']);
    expect(await directory.stateOf('acme')).toBe('enabled');
    expect(await directory.stateOf('frozen')).toBe('disabled');
    database.down = true;
    advance(61_000);
    // Past the minute each lookup asks the database; it cannot answer, the last state stands.
    expect(await directory.stateOf('acme')).toBe('enabled');
    expect(await directory.stateOf('frozen')).toBe('disabled');
    expect(await directory.stateOf('acme')).toBe('enabled');
    expect(calls.filter((id) => id === 'acme')).toHaveLength(3);
    // Never confirmed: no state to fall back on, the failure is the answer.
    await expect(directory.stateOf('other')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    // Beyond the hour nothing is vouched for.
    advance(60 * 60_000);
    await expect(directory.stateOf('acme')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    database.down = false;
    expect(await directory.stateOf('acme')).toBe('enabled');
  });

  it('remembers an unknown id for five seconds', async () => {
    const { directory, calls, advance } = setup([]);
    expect(await directory.stateOf('nope')).toBe('absent');
    expect(await directory.stateOf('nope')).toBe('absent');
    expect(calls).toEqual(['nope']);
    advance(5_001);
    expect(await directory.stateOf('nope')).toBe('absent');
    expect(calls).toEqual(['nope', 'nope']);
  });

  it('reaches the database at a bounded rate under a flood of random ids', async () => {
    const { directory, calls, advance } = setup(['acme']);
    await directory.stateOf('acme');
    for (let second = 0; second < 3; second++) {
      const answers = await Promise.all(
        // A promise each, whether answered at once or by the database.
        Array.from({ length: 5_000 }, (_, i) =>
          Promise.resolve(directory.stateOf(`flood-${second}-${i}`)),
        ),
      );
      expect(answers.every((answer) => answer === 'absent')).toBe(true);
      advance(1_000);
    }
    // One lookup for acme, then at most the burst plus the refill of each second.
    expect(calls.length).toBeLessThanOrEqual(1 + 50 * 3);
    expect(calls.length).toBeGreaterThanOrEqual(1 + 50);
  });

  it('never loses a real organization to a flood: 20,000 unknown ids later it is still served', async () => {
    const { directory, advance } = setup(['acme']);
    expect(await directory.stateOf('acme')).toBe('enabled');
    for (let i = 0; i < 20_000; i++) await directory.stateOf(`flood-${i}`);
    expect(directory.stateOf('acme')).toBe('enabled');
    // Gone stale while the lookup budget is spent: still served, without the database.
    advance(61_000);
    for (let i = 0; i < 200; i++) await directory.stateOf(`late-${i}`);
    expect(await directory.stateOf('acme')).toBe('enabled');
  });

  it('merges concurrent lookups of one id into one database call', async () => {
    const { directory, calls } = setup(['acme']);
    const answers = await Promise.all(
      [1, 2, 3].map(() => Promise.resolve(directory.stateOf('acme'))),
    );
    expect(answers).toEqual(['enabled', 'enabled', 'enabled']);
    expect(calls).toEqual(['acme']);
  });

  it('knows a disabled organization as disabled, at once, never as enabled', async () => {
    const { directory, calls } = setup([], ['frozen']);
    expect(await directory.stateOf('frozen')).toBe('disabled');
    expect(await directory.stateOf('frozen')).toBe('disabled');
    expect(directory.stateOf('frozen')).toBe('disabled');
    expect(calls).toEqual(['frozen']);
  });

  it('takes a learned change at once, without the database', async () => {
    const { directory, calls } = setup(['acme']);
    expect(await directory.stateOf('acme')).toBe('enabled');
    directory.learn('acme', 'disabled');
    expect(directory.stateOf('acme')).toBe('disabled');
    expect(await directory.stateOf('acme')).toBe('disabled');
    directory.learn('acme', 'enabled');
    expect(directory.stateOf('acme')).toBe('enabled');
    directory.learn('acme', 'absent');
    expect(await directory.stateOf('acme')).toBe('absent');
    expect(calls).toEqual(['acme']);
  });

  it('lets no lookup that started before a learned change overwrite it', async () => {
    let release: (value: { id: string; enabled: boolean }) => void = () => undefined;
    const repo = {
      find: () => new Promise<{ id: string; enabled: boolean }>((resolve) => (release = resolve)),
    };
    const directory = createOrganizationDirectory(repo as never);
    const pending = directory.stateOf('acme');
    directory.learn('acme', 'disabled');
    release({ id: 'acme', enabled: true });
    expect(await pending).toBe('disabled');
    expect(await directory.stateOf('acme')).toBe('disabled');
  });
});
