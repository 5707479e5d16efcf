import { spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  chmod,
  chown,
  lchown,
  mkdir,
  mkdtemp,
  readdir,
  rm,
  stat,
  symlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest';
import {
  credentialsPathOf,
  readLogins,
  selectLogin,
  updateLogins,
  withLockedLogins,
  withLogin,
  withoutLogin,
  writeLogins,
  type StoredLogin,
} from '../../../src/cli/credentials.ts';
import { generateDpopKey } from '../../../src/cli/dpop.ts';
import { CliError } from '../../../src/cli/errors.ts';

// Every file the module opens, counted (and opened as usual): shows a lock being waited for.
const opened = vi.hoisted(() => [] as string[]);
vi.mock('node:fs/promises', async (importOriginal) => {
  const actual = await importOriginal<typeof import('node:fs/promises')>();
  const open: typeof actual.open = (path, ...rest) => {
    opened.push(String(path));
    return actual.open(path, ...rest);
  };
  return { ...actual, open };
});

const GATEWAY = 'http://localhost:8000/';
/** A user other than the one running the tests (root: they may chown to it). */
const OTHER_UID = 4242;

function loginOf(overrides: Partial<StoredLogin> = {}): StoredLogin {
  return {
    gateway: GATEWAY,
    realm: 'acme',
    username: 'alice',
    sessionId: 's-1',
    refreshToken: 'refresh-1',
    loggedInAt: '2026-11-01T00:00:00.000Z',
    ...overrides,
  };
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'realmgate-credentials-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('credentialsPathOf', () => {
  it('takes REALMGATE_CONFIG_DIR, then an absolute XDG_CONFIG_HOME, then HOME', () => {
    const env = { REALMGATE_CONFIG_DIR: '/c', XDG_CONFIG_HOME: '/x', HOME: '/h' };
    expect(credentialsPathOf(env)).toBe('/c/credentials.json');
    expect(credentialsPathOf({ ...env, REALMGATE_CONFIG_DIR: '' })).toBe(
      '/x/realmgate/credentials.json',
    );
    expect(credentialsPathOf({ XDG_CONFIG_HOME: 'relative', HOME: '/h' })).toBe(
      '/h/.config/realmgate/credentials.json',
    );
    expect(credentialsPathOf({})).toBeUndefined();
  });
});

describe('writeLogins and readLogins', () => {
  it('creates the directory 0700 and the file 0600 whatever the umask, leaving no temp file', async () => {
    const path = join(dir, 'a', 'b', 'credentials.json');
    const umask = process.umask(0);
    try {
      await writeLogins(path, [loginOf()]);
    } finally {
      process.umask(umask);
    }
    expect((await stat(join(dir, 'a', 'b'))).mode & 0o777).toBe(0o700);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(await readdir(join(dir, 'a', 'b'))).toEqual(['credentials.json']);
    expect(await readLogins(path)).toEqual([loginOf()]);
  });

  it("leaves an existing directory's mode (a project folder), and replaces the file whole", async () => {
    const configDir = join(dir, 'project');
    await mkdir(configDir, { mode: 0o755 });
    await chmod(configDir, 0o755);
    const path = join(configDir, 'credentials.json');
    await writeLogins(path, [loginOf()]);
    const second = loginOf({ realm: 'master', sessionId: 's-2' });
    await updateLogins(path, (logins) => withLogin(logins, second));
    expect((await stat(configDir)).mode & 0o777).toBe(0o755);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(await readLogins(path)).toEqual([loginOf(), second]);
  });

  it("keeps a login's DPoP key in the same 0600 file, and reads a login without one", async () => {
    const path = join(dir, 'credentials.json');
    const bound = loginOf({ sessionId: 's-2', realm: 'master', dpopKey: await generateDpopKey() });
    await writeLogins(path, [loginOf(), bound]);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(await readLogins(path)).toEqual([loginOf(), bound]);
  });

  it('reads a missing file as no logins', async () => {
    expect(await readLogins(join(dir, 'none.json'))).toEqual([]);
  });

  it('refuses a file other users can read, saying how to fix it', async () => {
    const path = join(dir, 'credentials.json');
    await writeLogins(path, [loginOf()]);
    await chmod(path, 0o644);
    const error = await readLogins(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).message).toBe(
      `${path} is open to other users (mode 644); run chmod 600 ${path}`,
    );
    expect((error as CliError).exitCode).toBe(2);
  });

  it('refuses a file another user owns, whatever its mode, saying whose it is', async () => {
    // In a directory others can write, another user could plant a 0600 file of theirs: a
    // realmgate run by root would take its logins (and bind new ones to its key) as its own.
    const path = join(dir, 'credentials.json');
    await writeLogins(path, [loginOf()]);
    await chown(path, OTHER_UID, OTHER_UID);
    const error = await readLogins(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).message).toBe(
      `${path} belongs to another user (uid ${OTHER_UID}), not to this one ` +
        `(uid ${process.getuid!()}); move it away and log in again`,
    );
    expect((error as CliError).exitCode).toBe(2);
  });

  it('refuses a symlink another user made, and follows one of its own user', async () => {
    const target = join(dir, 'mine.json');
    await writeLogins(target, [loginOf()]);
    const own = join(dir, 'own-link.json');
    await symlink(target, own);
    expect(await readLogins(own)).toEqual([loginOf()]);
    const planted = join(dir, 'credentials.json');
    await symlink(target, planted);
    await lchown(planted, OTHER_UID, OTHER_UID);
    await expect(readLogins(planted)).rejects.toThrow(
      new CliError(
        'config',
        `${planted} is a symbolic link another user (uid ${OTHER_UID}) made; ` +
          'move it away and log in again',
      ),
    );
  });

  it.each([
    ['not JSON', '{'],
    ['another version', JSON.stringify({ version: 2, logins: [] })],
    ['an entry without refresh token', JSON.stringify({ version: 1, logins: [{ realm: 'x' }] })],
    [
      'an entry whose key is not a P-256 private key',
      JSON.stringify({ version: 1, logins: [loginOf({ dpopKey: { kty: 'oct' } as never })] }),
    ],
  ])('refuses %s without showing its content', async (_, text) => {
    const path = join(dir, 'credentials.json');
    await writeFile(path, text, { mode: 0o600 });
    await expect(readLogins(path)).rejects.toThrow(
      `${path} is not a realmgate credentials file; move it away and log in again`,
    );
  });
});

describe('one entry per gateway, realm and user', () => {
  it('replaces the entry with the same key (user name in any case), keeps the others', () => {
    const other = loginOf({ realm: 'master' });
    const elsewhere = loginOf({ gateway: 'https://gw.example/' });
    const logins = [loginOf(), other, elsewhere];
    const again = loginOf({ username: 'Alice', sessionId: 's-9' });
    expect(withLogin(logins, again)).toEqual([again, other, elsewhere]);
    expect(withLogin([other], again)).toEqual([other, again]);
    expect(withoutLogin(logins, again)).toEqual([other, elsewhere]);
  });

  it('selects by --realm and --user at the gateway, else the most recent login', () => {
    const old = loginOf({ realm: 'master', username: 'root', loggedInAt: '2026-10-01T00:00:00Z' });
    const recent = loginOf({ loggedInAt: '2026-11-02T00:00:00Z' });
    const bob = loginOf({ username: 'bob', loggedInAt: '2026-11-01T00:00:00Z' });
    const elsewhere = loginOf({
      gateway: 'https://gw.example/',
      loggedInAt: '2026-12-01T00:00:00Z',
    });
    const logins = [old, recent, bob, elsewhere];
    expect(selectLogin(logins, GATEWAY, {})).toBe(recent);
    expect(selectLogin(logins, GATEWAY, { realm: 'master' })).toBe(old);
    expect(selectLogin(logins, GATEWAY, { user: 'BOB' })).toBe(bob);
    expect(selectLogin(logins, GATEWAY, { realm: 'master', user: 'bob' })).toBeUndefined();
    expect(selectLogin(logins, 'http://other/', {})).toBeUndefined();
  });
});

describe('updateLogins', () => {
  it('loses no change when many writers update the file at once', async () => {
    const path = join(dir, 'credentials.json');
    const users = Array.from({ length: 20 }, (_, i) => `user-${i}`);
    // Each writer reads, yields, then writes: without the lock most additions would be lost.
    await Promise.all(
      users.map((username) =>
        updateLogins(path, (logins) => withLogin(logins, loginOf({ username }))),
      ),
    );
    expect((await readLogins(path)).map((l) => l.username).sort()).toEqual([...users].sort());
    // The lock is gone afterwards, and so is every temporary file.
    expect(await readdir(dir)).toEqual(['credentials.json']);
  });

  it('waits for a lock another process holds, and takes over a stale one', async () => {
    const path = join(dir, 'credentials.json');
    const lockPath = `${path}.lock`;
    await writeFile(lockPath, '');
    let done = false;
    const update = updateLogins(path, (logins) => withLogin(logins, loginOf())).then(() => {
      done = true;
    });
    // It found the lock held twice, so it waits (between tries), and has not written.
    const tries = () => opened.filter((opening) => opening === lockPath).length;
    await vi.waitFor(() => expect(tries()).toBeGreaterThanOrEqual(2));
    expect(done).toBe(false);
    await rm(lockPath);
    await update;
    expect(await readLogins(path)).toEqual([loginOf()]);

    // A lock left by a process that died long ago does not block anyone.
    await writeFile(lockPath, '');
    const longAgo = new Date(Date.now() - 60_000);
    await utimes(lockPath, longAgo, longAgo);
    await updateLogins(path, (logins) => withoutLogin(logins, loginOf()));
    expect(await readLogins(path)).toEqual([]);
  });

  it('keeps a lock it holds for long touched, so that no one takes it over as stale', async () => {
    const path = join(dir, 'credentials.json');
    const lockPath = `${path}.lock`;
    const alice = loginOf();
    const bob = loginOf({ username: 'bob', sessionId: 's-2' });
    vi.useFakeTimers({ toFake: ['Date', 'setInterval', 'clearInterval'] });
    try {
      let finish = () => {};
      // A holder that waits for a slow gateway (a refresh grant) before it writes.
      const held = withLockedLogins(path, 10_000, 'a test hold', async (logins) => {
        await new Promise<void>((resolve) => (finish = resolve));
        return { logins: withLogin(logins, alice), value: undefined };
      });
      await vi.waitFor(() => expect(opened).toContain(lockPath));
      // 40 s, a touch every 10 s, each seen before the next: touches run together could land in
      // any order on the file system's threads, an older one last.
      for (let touches = 0; touches < 4; touches++) {
        await vi.advanceTimersByTimeAsync(10_000);
        // Touched at the last tick: as fresh as the clock says.
        await vi.waitFor(async () =>
          expect((await stat(lockPath)).mtimeMs).toBeGreaterThan(Date.now() - 1000),
        );
      }
      let done = false;
      const other = updateLogins(path, (logins) => withLogin(logins, bob)).then(() => {
        done = true;
      });
      const tries = () => opened.filter((opening) => opening === lockPath).length;
      await vi.waitFor(() => expect(tries()).toBeGreaterThanOrEqual(3));
      expect(done).toBe(false);
      finish();
      await Promise.all([held, other]);
    } finally {
      vi.useRealTimers();
    }
    // One after the other: neither change was lost.
    expect(await readLogins(path)).toEqual([alice, bob]);
  });

  it.each([
    // Older than a stale lock, but a directory cannot be unlinked.
    ['an old directory', (lockPath: string) => mkdir(lockPath), 60_000],
    // Held (not yet stale), though what it points to does not exist.
    ['a dangling symlink', (lockPath: string) => symlink(join(dir, 'gone'), lockPath), 15_000],
  ])('gives up at the deadline when the lock is %s', async (_, make, later) => {
    const path = join(dir, 'credentials.json');
    const lockPath = `${path}.lock`;
    await make(lockPath);
    // Only the clock is faked: the waits between tries stay real and short.
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      const update = updateLogins(path, (logins) => withLogin(logins, loginOf()));
      const failed = expect(update).rejects.toThrow(
        new CliError(
          'config',
          `${lockPath} is held by another realmgate; if none is running, remove it`,
        ),
      );
      const tries = () => opened.filter((opening) => opening === lockPath).length;
      await vi.waitFor(() => expect(tries()).toBeGreaterThanOrEqual(2));
      // Past the wait for the lock.
      vi.setSystemTime(Date.now() + later);
      await failed;
    } finally {
      vi.useRealTimers();
    }
    expect(await readLogins(path)).toEqual([]);
  });

  it('lets a holder stopped past the stale time write nothing over the login of the process that took its lock over', async () => {
    const path = join(dir, 'credentials.json');
    const lockPath = `${path}.lock`;
    const alice = loginOf();
    const bob = loginOf({ username: 'bob', sessionId: 's-2' });
    // Another realmgate process: it holds the lock and reads the file (no logins yet), says so,
    // and writes alice beside what it read once told to go on (its refresh grant answered).
    const module = new URL('../../../src/cli/credentials.ts', import.meta.url).href;
    const holder = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `
        import { once } from 'node:events';
        import { withLockedLogins, withLogin } from ${JSON.stringify(module)};
        try {
          await withLockedLogins(process.argv[1], 10000, 'the paused', async (logins) => {
            process.stdout.write('holding\\n');
            await once(process.stdin, 'data');
            return { logins: withLogin(logins, JSON.parse(process.argv[2])), value: undefined };
          });
        } catch (error) {
          process.stderr.write(error.message);
          process.exitCode = error.exitCode ?? 1;
        }
        process.stdin.destroy();
        `,
        path,
        JSON.stringify(alice),
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    let stderr = '';
    holder.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const exited = once(holder, 'exit');
    onTestFinished(() => {
      if (holder.exitCode === null && holder.signalCode === null) holder.kill('SIGKILL');
    });
    const [said] = (await once(createInterface({ input: holder.stdout }), 'line')) as [string];
    expect(said).toBe('holding');
    // The holder is stopped (SIGSTOP, a suspended VM) past the stale time: its lock is not
    // touched for a minute, so this process takes it over and writes bob.
    holder.kill('SIGSTOP');
    const longAgo = new Date(Date.now() - 60_000);
    await utimes(lockPath, longAgo, longAgo);
    await updateLogins(path, (logins) => withLogin(logins, bob));
    expect(await readLogins(path)).toEqual([bob]);
    // The holder resumes, its work done, and would write what it read before it was stopped.
    holder.kill('SIGCONT');
    holder.stdin.write('go\n');
    const [code] = (await exited) as [number | null];
    // Bob's login is still there: the holder saw that the lock was no longer its own.
    expect(await readLogins(path)).toEqual([bob]);
    expect(code).toBe(6);
    expect(stderr).toContain('taken over');
    expect(await readdir(dir)).toEqual(['credentials.json']);
  }, 30_000);

  it('turns a directory it cannot create into a configuration error naming it', async () => {
    // Root writes through any mode bits: a regular file where a directory should be stops it.
    await writeFile(join(dir, 'file'), '');
    const configDir = join(dir, 'file', 'realmgate');
    await expect(
      updateLogins(join(configDir, 'credentials.json'), (logins) => withLogin(logins, loginOf())),
    ).rejects.toThrow(
      new CliError('config', `cannot write the credentials in ${configDir} (ENOTDIR)`),
    );
  });

  it('a realmgate stopped (Ctrl-C, a CI cancel) while it writes the file leaves no copy of the refresh token beside it', async () => {
    const path = join(dir, 'credentials.json');
    const credentials = new URL('../../../src/cli/credentials.ts', import.meta.url).href;
    const lock = new URL('../../../src/cli/credentials-lock.ts', import.meta.url).href;
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
      // Another realmgate holding the lock, its new file whole but not yet renamed into place.
      const writer = spawn(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `
          import { writeLogins } from ${JSON.stringify(credentials)};
          import { takeLock } from ${JSON.stringify(lock)};
          const path = process.argv[1];
          await takeLock(path + '.lock', 1000, 'a write');
          await writeLogins(path, [JSON.parse(process.argv[2])], async () => {
            process.stdout.write('whole\\n');
            await new Promise(() => setInterval(() => {}, 1000));
          });
          `,
          path,
          JSON.stringify(loginOf()),
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      const exited = once(writer, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
      onTestFinished(() => {
        if (writer.exitCode === null && writer.signalCode === null) writer.kill('SIGKILL');
      });
      const [said] = (await once(createInterface({ input: writer.stdout }), 'line')) as [string];
      expect(said).toBe('whole');
      expect((await readdir(dir)).some((name) => name.endsWith('.tmp'))).toBe(true);
      writer.kill(signal);
      // Ended by the signal itself, as the shell and CI runners expect, and nothing is left:
      // neither the lock nor the temporary file with the refresh token in it.
      expect(await exited).toEqual([null, signal]);
      expect(await readdir(dir), signal).toEqual([]);
    }
  }, 30_000);

  it('writes nothing when the change returns undefined', async () => {
    const path = join(dir, 'credentials.json');
    expect(await updateLogins(path, () => undefined)).toEqual([]);
    expect(await readdir(dir)).toEqual([]);
  });
});
