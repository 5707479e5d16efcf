import { randomUUID } from 'node:crypto';
import { readFileSync, unlinkSync, type Stats } from 'node:fs';
import { lstat, mkdir, open, readFile, unlink, utimes } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { dirname } from 'node:path';
import { printable } from './client.ts';
import { CliError } from './errors.ts';
import { cleanUpIfStopped } from './on-stop.ts';

// The lock file of the credentials file: one realmgate process at a time reads, changes and
// writes it (a refresh grant included). It holds what its holder is doing, for those waiting.

/**
 * A lock not touched for this long was left by a process that died: its holder touches it
 * every third of this while it holds it (a write takes well under a second, a refresh grant
 * as long as the gateway takes to answer).
 */
const STALE_LOCK_MS = 30_000;

/**
 * The release of a held lock; `ensureHeld` throws (busy) when the lock is no longer this
 * holder's, to be called right before what the lock guards is written.
 */
export type LockRelease = (() => Promise<void>) & { ensureHeld: () => Promise<void> };

/**
 * Creates the lock file exclusively, waiting up to `waitMs` while another process holds it;
 * keeps it touched while held, so that a long hold is not taken for one left by a dead process.
 * `purpose` (what the hold is for, e.g. a refresh at a gateway) is written into it, and is what
 * a process that gives up waiting names. Returns the release.
 */
export async function takeLock(
  lockPath: string,
  waitMs: number,
  purpose: string,
): Promise<LockRelease> {
  await mkdir(dirname(lockPath), { recursive: true, mode: 0o700 });
  const deadline = Date.now() + waitMs;
  for (let delay = 5; ; delay = Math.min(delay * 2, 100)) {
    try {
      const handle = await open(lockPath, 'wx', 0o600);
      // Touched from the moment it exists, however long writing its holder takes.
      const touching = setInterval(() => {
        const now = new Date();
        utimes(lockPath, now, now).catch(() => {});
      }, STALE_LOCK_MS / 3);
      // A command that is done does not wait for the next touch.
      touching.unref();
      const owner = randomUUID();
      const stopRemoving = removeWhenStopped(lockPath, owner, touching);
      const stopHolding = () => {
        stopRemoving();
        clearInterval(touching);
      };
      try {
        await handle.writeFile(`${JSON.stringify({ pid: process.pid, purpose, owner })}\n`, 'utf8');
      } catch (error) {
        // Created a moment ago, far from stale: nobody can have taken it over yet.
        stopHolding();
        await unlink(lockPath).catch(() => {});
        throw error;
      } finally {
        await handle.close();
      }
      const release = async () => {
        stopHolding();
        await removeIfOurs(lockPath, owner);
      };
      return Object.assign(release, {
        ensureHeld: async () => {
          if (!(await isOurs(lockPath, owner))) throw lostLock(lockPath);
        },
      });
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'EEXIST') throw error;
    }
    if (await takenOverIfStale(lockPath)) continue;
    if (Date.now() > deadline) throw await gaveUp(lockPath, waitMs);
    await sleep(delay);
  }
}

/**
 * While the lock is held, a signal that stops the command removes the lock first, then ends
 * the process by that signal as it would have ended: left behind, the lock would look held
 * for 30 s, and every realmgate of the host would give up waiting for it (exit 6) meanwhile,
 * naming a process that no longer runs. Returns what stops the watch, at release.
 */
function removeWhenStopped(lockPath: string, owner: string, touching: NodeJS.Timeout): () => void {
  return cleanUpIfStopped(() => {
    clearInterval(touching);
    if (ownerOf(readFileSync(lockPath, 'utf8')) === owner) unlinkSync(lockPath);
  });
}

/**
 * Removes the lock only while it is still the one this holder made: a holder paused past the
 * stale time may have had it taken over, and removing the new holder's lock by name would let
 * a third process write the credentials file beside that one.
 */
async function removeIfOurs(lockPath: string, owner: string): Promise<void> {
  if (await isOurs(lockPath, owner)) await unlink(lockPath).catch(() => {});
}

/**
 * Whether the lock is still the one this holder made (`owner` written in it). The owner is a
 * random token, not the inode or the pid: a removed lock's inode is often given straight to the
 * next file made, and pids repeat across containers sharing a home directory.
 *
 * The lock is touched first, so a waiter about to take it over as stale finds it changed at
 * its recheck and backs off; what is left is a takeover that completes entirely between this
 * read and what the caller does next (an unlink, a rename), which nothing done by file name
 * can rule out: only a holder stopped again for 30 s in exactly that gap meets it.
 */
async function isOurs(lockPath: string, owner: string): Promise<boolean> {
  try {
    const now = new Date();
    await utimes(lockPath, now, now);
    return ownerOf(await readFile(lockPath, 'utf8')) === owner;
  } catch {
    // Gone already, or not a file we can read: not ours.
    return false;
  }
}

/** The error of a holder whose lock was taken over as stale while it was stopped. */
function lostLock(lockPath: string): CliError {
  return new CliError(
    'busy',
    `${lockPath} was taken over by another realmgate while this one was stopped for over ` +
      `${STALE_LOCK_MS / 1000} s; nothing was written over its change; retry`,
  );
}

/** The owner token a lock file holds; undefined for one of an older realmgate, or garbled. */
function ownerOf(text: string): string | undefined {
  try {
    const owner = (JSON.parse(text) as { owner?: unknown }).owner;
    return typeof owner === 'string' ? owner : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Removes the lock when it is stale, one waiter at a time: two waiters that both judged it
 * stale must not both remove a lock, the second removing the fresh lock the first then took.
 * The lock is removed under a takeover file (created exclusively), and only while it is still
 * the very file judged stale (same inode, not touched since). True: try to take it at once.
 *
 * A takeover file left by a waiter that died within its takeover is not removed by name: two
 * waiters that both judged it stale would race as over the lock itself (one removes it and
 * makes a fresh one, the other removes that one, and two takeovers run at once). Takeover files
 * are named after the lock they take over, and a stale one is passed: the next is `-2`, `-3`,
 * each created exclusively, so exactly one waiter holds each. They are removed once the lock
 * they were for has been removed or changed, when no recheck against it can succeed any more.
 */
async function takenOverIfStale(lockPath: string): Promise<boolean> {
  const judged = await statOf(lockPath);
  if (judged === undefined) return true;
  if (Date.now() - judged.mtimeMs < STALE_LOCK_MS) return false;
  const takeoverPath = (n: number) => `${lockPath}.takeover-${judged.ino}-${judged.mtimeMs}-${n}`;
  for (let n = 1; ; n += 1) {
    try {
      await (await open(takeoverPath(n), 'wx', 0o600)).close();
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'EEXIST') return false;
      const takeover = await statOf(takeoverPath(n));
      // Gone: the lock it was for is gone too. Fresh: another waiter is taking the lock over.
      if (takeover === undefined || Date.now() - takeover.mtimeMs < STALE_LOCK_MS) return false;
      continue;
    }
    try {
      return await removedIfStill(lockPath, judged);
    } finally {
      for (let passed = n; passed >= 1; passed -= 1) {
        await unlink(takeoverPath(passed)).catch(() => {});
      }
    }
  }
}

/** Removes the lock if it is still the file `judged`; true when no lock is left there. */
async function removedIfStill(lockPath: string, judged: Stats): Promise<boolean> {
  try {
    const now = await statOf(lockPath);
    if (now === undefined) return true;
    const same = now.dev === judged.dev && now.ino === judged.ino && now.mtimeMs === judged.mtimeMs;
    if (!same) return false;
    await unlink(lockPath);
    return true;
  } catch (error) {
    // Anything unlink refuses (a directory) is waited on until the deadline like a held lock.
    return (error as { code?: unknown }).code === 'ENOENT';
  }
}

/** lstat (a dangling symlink is a lock too, not a lock released); undefined: no lock there. */
async function statOf(path: string): Promise<Stats | undefined> {
  try {
    return await lstat(path);
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * The error of a wait that outlasted `waitMs`: a lock file another realmgate holds is `busy`
 * (exit 6), naming what it holds it for; anything else there is the user's to remove.
 */
async function gaveUp(lockPath: string, waitMs: number): Promise<CliError> {
  const holder = await holderOf(lockPath);
  if (holder === undefined) {
    return new CliError(
      'config',
      `${lockPath} is held by another realmgate; if none is running, remove it`,
    );
  }
  const by =
    holder.pid === undefined ? 'another realmgate' : `another realmgate (pid ${holder.pid})`;
  const what = printable(holder.purpose ?? 'a change of the credentials file');
  return new CliError(
    'busy',
    `gave up after ${Math.round(waitMs / 1000)} s waiting for ${what} by ${by}, which holds ` +
      `${lockPath}; retry later`,
  );
}

/** What the holder of a lock file wrote in it; undefined when the lock is not a regular file. */
async function holderOf(
  lockPath: string,
): Promise<{ pid: number | undefined; purpose: string | undefined } | undefined> {
  try {
    if (!(await lstat(lockPath)).isFile()) return undefined;
    const text = await readFile(lockPath, 'utf8');
    const held = JSON.parse(text) as { pid?: unknown; purpose?: unknown };
    return {
      pid: typeof held.pid === 'number' ? held.pid : undefined,
      purpose: typeof held.purpose === 'string' ? held.purpose : undefined,
    };
  } catch (error) {
    // Released meanwhile, or written by an older realmgate (empty): a holder all the same.
    const code = (error as { code?: unknown }).code;
    return code === undefined || code === 'ENOENT'
      ? { pid: undefined, purpose: undefined }
      : undefined;
  }
}
