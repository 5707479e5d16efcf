import { mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { takeLock } from '../../../src/cli/credentials-lock.ts';
import { CliError } from '../../../src/cli/errors.ts';

// lstat of the lock can be held after it read the file: a waiter's judgement "stale" is then
// made at one moment and acted on later, as when the scheduler runs another waiter in between.
const held = vi.hoisted(() => ({ path: '', gates: [] as Array<Promise<void>> }));
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  const lstat = (async (path: string) => {
    const stats = await actual.lstat(path);
    if (path === held.path) await held.gates.shift();
    return stats;
  }) as typeof actual.lstat;
  return { ...actual, lstat };
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
    await vi.waitFor(() => expect(held.gates).toHaveLength(1));
    const b = takeLock(lockPath, 300, 'the second');
    await vi.waitFor(() => expect(held.gates).toEqual([]));
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
});
