import { describe, expect, it } from 'vitest';
import type { AppError } from '../../../src/envelope/errors.ts';
import { createOrganizationDirectory } from '../../../src/platform/organization-directory.ts';
import type {
  OrganizationMemory,
  RecalledOrganization,
} from '../../../src/platform/organization-memory.ts';
import type { OrganizationState } from '../../../src/tenancy/organization-state.ts';
import { manualClock } from '../../helpers/test-clock.ts';

/**
 * A repository that knows `real` (enabled) and `disabled`, and counts its lookups, with a clock
 * the test moves.
 */
function setup(real: string[], disabled: string[] = [], memory?: OrganizationMemory) {
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
  const directory = createOrganizationDirectory(repo as never, clock, memory);
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

  it('reaches the database at a bounded rate under a flood of random ids, never calling one absent unasked', async () => {
    const { directory, calls, advance } = setup(['acme']);
    await directory.stateOf('acme');
    for (let second = 0; second < 3; second++) {
      const answers = await Promise.all(
        // The database's answer, or the refusal of an id it was not asked about.
        Array.from({ length: 5_000 }, (_, i) =>
          Promise.resolve()
            .then(() => directory.stateOf(`flood-${second}-${i}`))
            .catch((err: unknown) => (err as AppError).code),
        ),
      );
      const absent = answers.filter((answer) => answer === 'absent').length;
      expect(absent).toBe(calls.filter((id) => id.startsWith(`flood-${second}-`)).length);
      expect(answers.length - absent).toBe(
        answers.filter((answer) => answer === 'databaseUnavailable').length,
      );
      advance(1_000);
    }
    // One lookup for acme, then at most the burst plus the refill of each second.
    expect(calls.length).toBeLessThanOrEqual(1 + 50 * 3);
    expect(calls.length).toBeGreaterThanOrEqual(1 + 50);
  });

  it('never loses a real organization to a flood: 20,000 unknown ids later it is still served', async () => {
    const { directory, advance } = setup(['acme']);
    expect(await directory.stateOf('acme')).toBe('enabled');
    const flood = async (id: string) => {
      try {
        await directory.stateOf(id, '192.0.2.66');
      } catch {
        // Out of lookups: refused, as it should be.
      }
    };
    for (let i = 0; i < 20_000; i++) await flood(`flood-${i}`);
    expect(directory.stateOf('acme')).toBe('enabled');
    // Gone stale while the lookup budget is spent: still served, without the database.
    advance(61_000);
    for (let i = 0; i < 200; i++) await flood(`late-${i}`);
    expect(await directory.stateOf('acme')).toBe('enabled');
  });

  it('lets a flood from one address spend no lookup kept for the others: a real organization not confirmed yet is found for them', async () => {
    const { directory, calls } = setup(['acme']);
    const refusals: unknown[] = [];
    for (let i = 0; i < 1_000; i++) {
      try {
        expect(await directory.stateOf(`made-up-${i}`, '192.0.2.66')).toBe('absent');
      } catch (err) {
        refusals.push(err);
      }
    }
    // Its share (10) and what the others could spare (30 of the 40 left): the rest refused,
    // never called absent.
    expect(calls).toHaveLength(40);
    expect(refusals).toHaveLength(960);
    expect(refusals[0]).toMatchObject({
      code: 'databaseUnavailable',
      status: 503,
      headers: { 'retry-after': '1' },
    });
    // Other addresses, the clock standing still: acme is looked up and found, a made-up id absent.
    expect(await directory.stateOf('acme', '192.0.2.7')).toBe('enabled');
    expect(await directory.stateOf('made-up-x', '192.0.2.8')).toBe('absent');
    // The flooder asking for acme now: known, at once.
    expect(directory.stateOf('acme', '192.0.2.66')).toBe('enabled');
  });

  it('counts an IPv6 host by its /64: a new address of it for each id spends one share', async () => {
    const { directory, calls } = setup(['acme']);
    const refusals: unknown[] = [];
    for (let i = 0; i < 1_000; i++) {
      try {
        await directory.stateOf(`made-up-${i}`, `2001:db8:1:2::${(i + 1).toString(16)}`);
      } catch (err) {
        refusals.push(err);
      }
    }
    // As one address: its share and what the others could spare, the rest refused.
    expect(calls).toHaveLength(40);
    expect(refusals).toHaveLength(960);
    // Another /64, and IPv4 clients behind one NAT64, are others.
    expect(await directory.stateOf('acme', '2001:db8:1:3::1')).toBe('enabled');
    expect(await directory.stateOf('made-up-x', '64:ff9b::192.0.2.7')).toBe('absent');
    expect(await directory.stateOf('made-up-y', '64:ff9b::192.0.2.8')).toBe('absent');
  });

  it('refuses (503) an id never seen once the replica is out of lookups, from any address', async () => {
    const { directory } = setup(['acme']);
    for (let address = 0; address < 5; address++) {
      for (let i = 0; i < 10; i++) {
        await directory.stateOf(`made-up-${address}-${i}`, `192.0.2.${address}`);
      }
    }
    // Five addresses, each within its share, spent the replica's fifty: acme, never confirmed,
    // is not called absent.
    expect(() => directory.stateOf('acme', '192.0.2.99')).toThrow(
      expect.objectContaining({ code: 'databaseUnavailable' }),
    );
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

  it("remembers a lookup that overlapped another organization's learned change", async () => {
    let release: (value: { id: string; enabled: boolean }) => void = () => undefined;
    const repo = {
      find: () => new Promise<{ id: string; enabled: boolean }>((resolve) => (release = resolve)),
    };
    const directory = createOrganizationDirectory(repo as never);
    const pending = directory.stateOf('acme');
    // Another organization created or changed meanwhile (here or on another replica).
    directory.learn('other', 'enabled');
    release({ id: 'acme', enabled: true });
    expect(await pending).toBe('enabled');
    // Known: a refusal of its callers goes to its own log (api-decisions.ts), and the next
    // request is answered without the database.
    expect(directory.isKnown('acme')).toBe(true);
    expect(directory.stateOf('acme')).toBe('enabled');
  });

  /**
   * A repository whose one organization's state the test sets (as a committed change does), and
   * whose lookups wait until the test answers them, each with the state as of when it was asked.
   */
  function slowDatabase(enabled: boolean) {
    const held = { enabled };
    const waiting: { asked: boolean; answer: () => void; fail: (err: Error) => void }[] = [];
    const repo = {
      find: (id: string) => {
        const asked = held.enabled;
        return new Promise<{ id: string; enabled: boolean }>((resolve, reject) => {
          waiting.push({
            asked,
            answer: () => resolve({ id, enabled: asked }),
            fail: reject,
          });
        });
      },
    };
    return { held, waiting, repo };
  }

  it('ends with the database state when two changes arrive in the reverse of their commit order', async () => {
    // A disable committed first (R1), an enable second (R2): the database holds enabled. R1's
    // message reaches this replica last.
    const { held, waiting, repo } = slowDatabase(true);
    const directory = createOrganizationDirectory(repo as never);
    // What a replica does with each change it is told of (platform.area.ts).
    const apply = (state: OrganizationState) => {
      directory.learn('acme', state);
      return directory.reread('acme');
    };
    const rereads = [apply('enabled'), apply('disabled')];
    // Refused at once, as the last message says, until the database answers.
    expect(directory.stateOf('acme')).toBe('disabled');
    for (const read of waiting) read.answer();
    await Promise.all(rereads);
    expect(held.enabled).toBe(true);
    expect(directory.stateOf('acme')).toBe('enabled');

    // The other order: an enable committed first, a disable second, the enable's message last.
    held.enabled = false;
    const again = [apply('disabled'), apply('enabled')];
    for (const read of waiting.slice(2)) read.answer();
    await Promise.all(again);
    expect(directory.stateOf('acme')).toBe('disabled');
  });

  it('lets no re-read that started before a later change overwrite it, and no lookup of before the change stand for a re-read', async () => {
    const { held, waiting, repo } = slowDatabase(true);
    const directory = createOrganizationDirectory(repo as never);
    // A lookup asked while the organization was enabled, still under way when it is disabled.
    const lookup = directory.stateOf('acme');
    held.enabled = false;
    directory.learn('acme', 'disabled');
    const first = directory.reread('acme');
    // The re-read asked the database itself: the lookup's answer is of before the change.
    expect(waiting.map((read) => read.asked)).toEqual([true, false]);
    // Enabled again before the first re-read answers: that answer is older than this change.
    held.enabled = true;
    directory.learn('acme', 'enabled');
    const second = directory.reread('acme');
    waiting[0]!.answer();
    expect(await lookup).toBe('enabled');
    waiting[1]!.answer();
    await first;
    expect(directory.stateOf('acme')).toBe('enabled');
    waiting[2]!.answer();
    await second;
    expect(directory.stateOf('acme')).toBe('enabled');
    expect(waiting).toHaveLength(3);
  });

  it('keeps the announced state when the database cannot be asked again', async () => {
    const { waiting, repo } = slowDatabase(true);
    const directory = createOrganizationDirectory(repo as never);
    directory.learn('acme', 'disabled');
    const reread = directory.reread('acme');
    waiting[0]!.fail(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
    await reread;
    expect(directory.stateOf('acme')).toBe('disabled');
  });

  it("tells the siblings' memory a deletion the re-read confirms as one kept, never as news that only forgets", async () => {
    const notes: [string, OrganizationState, number, number][] = [];
    const memory: OrganizationMemory = {
      note: (...note) => void notes.push(note),
      recall: () => Promise.resolve(undefined),
    };
    const { directory } = setup(['acme'], [], memory);
    directory.learn('gone', 'absent');
    await directory.reread('gone');
    directory.learn('acme', 'disabled');
    await directory.reread('acme');
    const hour = 3_600_000;
    // Kept as the deletion was: a sibling's answer asked before it, told after, is older and
    // cannot bring the organization back into the memory.
    expect(notes).toEqual([
      ['gone', 'absent', 1_000_000, 1_000_000 + hour],
      ['gone', 'absent', 1_000_000, 1_000_000 + hour],
      ['acme', 'disabled', 1_000_000, 1_000_000 + hour],
      ['acme', 'enabled', 1_000_000, 1_000_000 + hour],
    ]);
    expect(directory.stateOf('gone')).toBe('absent');
    expect(directory.stateOf('acme')).toBe('enabled');
  });

  it("tells the siblings' memory what it learns, and serves what they confirmed while the database is down", async () => {
    const notes: [string, OrganizationState, number, number][] = [];
    const kept = new Map<string, RecalledOrganization>();
    const memory: OrganizationMemory = {
      note: (...note) => void notes.push(note),
      recall: (id) => Promise.resolve(kept.get(id)),
    };
    const { directory, database, advance } = setup(['acme'], [], memory);
    expect(await directory.stateOf('acme')).toBe('enabled');
    expect(await directory.stateOf('nothing')).toBe('absent');
    directory.learn('gone', 'absent');
    const hour = 3_600_000;
    expect(notes).toEqual([
      ['acme', 'enabled', 1_000_000, 1_000_000 + hour],
      // Absent when asked: forgets older news only.
      ['nothing', 'absent', 1_000_000, 1_000_000],
      // A deletion: kept, so that no older answer brings it back.
      ['gone', 'absent', 1_000_000, 1_000_000 + hour],
    ]);

    database.down = true;
    // Confirmed by a sibling 30 minutes before: served, with that age.
    kept.set('sibling', { state: 'enabled', at: 1_000_000 - 30 * 60_000 });
    kept.set('frozen', { state: 'disabled', at: 1_000_000 });
    expect(await directory.stateOf('sibling')).toBe('enabled');
    expect(await directory.stateOf('frozen')).toBe('disabled');
    await expect(directory.stateOf('never')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    // Kept here with its age: past the sibling's hour, it is no longer served.
    kept.clear();
    advance(29 * 60_000);
    expect(await directory.stateOf('sibling')).toBe('enabled');
    advance(2 * 60_000);
    await expect(directory.stateOf('sibling')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});
