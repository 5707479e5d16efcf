import { mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { takeLock } from '../../../src/cli/credentials-lock.ts';
import { CliError } from '../../../src/cli/errors.ts';
import { EVENTUALLY } from '../../helpers/eventually.ts';

// lstat can be held after it read the file: a waiter's judgement ("stale", "still the file
// judged") is then made at one moment and acted on later, as when the scheduler runs another
// waiter in between. Looks at the lock take `looks` in turn, except the look a waiter takes
// right after creating a takeover file (its recheck), which takes `rechecks`; looks at a
// takeover file take `takeoverLooks`. An empty list lets a look through.
const held = vi.hoisted(() => ({
  path: '',
  gates: [] as Array<Promise<void>>,
  rechecks: [] as Array<Promise<void>>,
  takeoverLooks: [] as Array<Promise<void>>,
  lockLooks: 0,
  recheckDue: false,
}));
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  const isTakeover = (path: unknown) =>
    held.path !== '' && String(path).startsWith(`${held.path}.takeover`);
  const lstat = (async (path: string) => {
    const stats = await actual.lstat(path);
    if (path === held.path) {
      held.lockLooks += 1;
      const recheck = held.recheckDue;
      held.recheckDue = false;
      await (recheck ? held.rechecks : held.gates).shift();
    } else if (isTakeover(path)) {
      await held.takeoverLooks.shift();
    }
    return stats;
  }) as typeof actual.lstat;
  const open = (async (...args: Parameters<typeof actual.open>) => {
    const handle = await actual.open(...args);
    if (isTakeover(args[0]) && args[1] === 'wx') held.recheckDue = true;
    return handle;
  }) as typeof actual.open;
  return { ...actual, lstat, open };
});

function gate(): { gate: Promise<void>; open(): void } {
  let open = () => {};
  const gate = new Promise<void>((resolve) => (open = resolve));
  return { gate, open };
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'realmgate-lock-'));
});
afterEach(async () => {
  held.path = '';
  held.gates = [];
  held.rechecks = [];
  held.takeoverLooks = [];
  held.lockLooks = 0;
  held.recheckDue = false;
  await rm(dir, { recursive: true, force: true });
});

describe('takeLock', () => {
  it('lets only one of two waiters that both judged a lock stale take it over', async () => {
    const lockPath = join(dir, 'credentials.json.lock');
    await writeFile(lockPath, '');
    const longAgo = new Date(Date.now() - 60_000);
    await utimes(lockPath, longAgo, longAgo);
    // Both waiters read the old lock before either acts on what it read.
    const first = gate();
    const second = gate();
    held.path = lockPath;
    held.gates = [first.gate, second.gate];
    // The second starts once the first holds the first gate: started together, either could
    // reach lstat first (the file system's threads answer in any order) and take the other's.
    const a = takeLock(lockPath, 300, 'the first');
    await vi.waitFor(() => expect(held.gates).toHaveLength(1), EVENTUALLY);
    const b = takeLock(lockPath, 300, 'the second');
    await vi.waitFor(() => expect(held.gates).toEqual([]), EVENTUALLY);
    // The first takes the stale lock over and holds it; only then does the second act.
    first.open();
    const releaseA = await a;
    expect(JSON.parse(await readFile(lockPath, 'utf8'))).toMatchObject({ purpose: 'the first' });
    second.open();
    const outcome = await b.then(
      async (releaseB) => {
        await releaseB();
        return 'held it too';
      },
      (error: unknown) => error,
    );
    expect(outcome).toEqual(
      new CliError(
        'busy',
        `gave up after 0 s waiting for the first by another realmgate (pid ${process.pid}), ` +
          `which holds ${lockPath}; retry later`,
      ),
    );
    expect((outcome as CliError).exitCode).toBe(6);
    await releaseA();
  });

  it('leaves the lock of the process that took its stale lock over when the paused holder releases', async () => {
    const lockPath = join(dir, 'credentials.json.lock');
    const releasePaused = await takeLock(lockPath, 0, 'the paused');
    // The holder pauses past the stale time (a stopped process, a suspended laptop): its lock
    // is not touched for a minute, and another process takes it over.
    const longAgo = new Date(Date.now() - 60_000);
    await utimes(lockPath, longAgo, longAgo);
    const releaseSecond = await takeLock(lockPath, 1_000, 'the second');
    expect(JSON.parse(await readFile(lockPath, 'utf8'))).toMatchObject({ purpose: 'the second' });
    // The paused holder resumes and releases what it believes is its lock.
    await releasePaused();
    expect(JSON.parse(await readFile(lockPath, 'utf8'))).toMatchObject({ purpose: 'the second' });
    // A third process still waits for the second, instead of writing beside it.
    await expect(takeLock(lockPath, 0, 'the third')).rejects.toMatchObject({ kind: 'busy' });
    await releaseSecond();
    await expect(readFile(lockPath, 'utf8')).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('lets only one of two waiters that both judged a crashed takeover stale take the lock over', async () => {
    const lockPath = join(dir, 'credentials.json.lock');
    await writeFile(lockPath, '');
    const longAgo = new Date(Date.now() - 60_000);
    await utimes(lockPath, longAgo, longAgo);
    held.path = lockPath;
    // A waiter that dies within its takeover: held for good at its recheck, its takeover file
    // left behind and, 30 s on, stale.
    const crashed = gate();
    held.rechecks = [crashed.gate];
    void takeLock(lockPath, 30_000, 'the crashed');
    await vi.waitFor(() => expect(held.rechecks).toEqual([]), EVENTUALLY);
    for (const name of await readdir(dir)) {
      if (name !== 'credentials.json.lock') await utimes(join(dir, name), longAgo, longAgo);
    }
    // Both waiters judge the left takeover file stale before either acts on what it read.
    const firstJudges = gate();
    const secondJudges = gate();
    const firstRechecks = gate();
    held.takeoverLooks = [firstJudges.gate, secondJudges.gate];
    held.rechecks = [firstRechecks.gate];
    const taken: string[] = [];
    const a = takeLock(lockPath, 30_000, 'the first');
    void a.then(() => taken.push('the first'));
    await vi.waitFor(() => expect(held.takeoverLooks).toHaveLength(1), EVENTUALLY);
    const b = takeLock(lockPath, 30_000, 'the second');
    void b.then(() => taken.push('the second'));
    await vi.waitFor(() => expect(held.takeoverLooks).toEqual([]), EVENTUALLY);
    // The first acts on its judgement and is held within its own takeover, at its recheck;
    // then the second acts on its judgement, made before the first's takeover began.
    firstJudges.open();
    await vi.waitFor(() => expect(held.rechecks).toEqual([]), EVENTUALLY);
    const looksBefore = held.lockLooks;
    secondJudges.open();
    // The second has taken the lock, or has looked at it again and again, waiting.
    await vi.waitFor(
      () => expect(taken.length + held.lockLooks - looksBefore).toBeGreaterThan(2),
      EVENTUALLY,
    );
    // The second is held in its next look at the lock, the judgement it reads there made
    // before the first's takeover ends: a loaded machine may run the second only after it. (Not
    // held, it could instead try the lock between the first's removal of the stale one and its
    // own creation, and take it: correct, only one holds it, but not this case.)
    const secondLooks = gate();
    held.gates = [secondLooks.gate];
    await vi.waitFor(() => expect(held.gates).toEqual([]), EVENTUALLY);
    firstRechecks.open();
    const releaseA = await a;
    expect(taken).toEqual(['the first']);
    expect(JSON.parse(await readFile(lockPath, 'utf8'))).toMatchObject({ purpose: 'the first' });
    // The second acts on its stale judgement, waits while the first holds the lock, and takes
    // it once it is released.
    const looksWhileHeld = held.lockLooks;
    secondLooks.open();
    await vi.waitFor(() => expect(held.lockLooks - looksWhileHeld).toBeGreaterThan(1), EVENTUALLY);
    expect(taken).toEqual(['the first']);
    await releaseA();
    const releaseB = await b;
    expect(taken).toEqual(['the first', 'the second']);
    expect(JSON.parse(await readFile(lockPath, 'utf8'))).toMatchObject({ purpose: 'the second' });
    await releaseB();
  }, 30_000);
});
