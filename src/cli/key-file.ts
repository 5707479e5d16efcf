import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { link, lstat, open, rename, rm } from 'node:fs/promises';
import { isAbsolute, resolve } from 'node:path';
import { takeLock } from './credentials-lock.ts';
import { LOCK_WAIT_MS } from './credentials.ts';
import { generateDpopKey, isDpopKey, thumbprintOf, type DpopKey } from './dpop.ts';
import { CliError } from './errors.ts';
import { cleanUpIfStopped } from './on-stop.ts';
import { readPrivateText } from './private-file.ts';

// A login's DPoP key kept apart from its refresh token (`login --key-file`, REALMGATE_KEY_FILE):
// a private JWK alone in a file of its own, mode 0600, made on the host that uses it, in the
// format docs/examples/dpop-proof.mjs reads. The credentials file then names the file and the
// key's thumbprint, never the key: a copy of the credentials (a CI secret) is a token without
// its key.

/** `--key-file`, else REALMGATE_KEY_FILE, as an absolute path; undefined when neither is set. */
export function keyFilePathOf(
  option: string | undefined,
  env: Record<string, string | undefined>,
): string | undefined {
  const path = option ?? env.REALMGATE_KEY_FILE;
  return path ? (isAbsolute(path) ? path : resolve(path)) : undefined;
}

/**
 * The key in `path`, made there (0600, never over an existing file) when the file does not
 * exist: the host's key, which each login with this file binds its tokens to. Written whole to
 * a file of its own beside `path`, then linked to `path` (renamed, where there are no hard
 * links): logins that make it at the same time (jobs of one host) all get the one that got
 * there first, and none reads a file half written, nor finds one after a crash.
 */
export async function keyOfFile(path: string): Promise<DpopKey> {
  const existing = await keyInFile(path);
  if (existing !== undefined) return existing;
  const key = await generateDpopKey();
  const temporary = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  // Stopped meanwhile (Ctrl-C, a CI cancel), realmgate removes the copy of the private key on
  // its way out. Watched from before it exists; its name is this login's alone.
  const stopWatching = cleanUpIfStopped(() => rmSync(temporary, { force: true }));
  try {
    const handle = await open(temporary, 'wx', 0o600);
    try {
      await handle.chmod(0o600); // whatever the umask
      await handle.writeFile(`${JSON.stringify(key)}\n`, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (!(await linked(temporary, path))) await renamedIfNone(temporary, path);
  } catch (error) {
    const made = (error as { code?: unknown }).code === 'EEXIST' && (await keyInFile(path));
    if (made) return made;
    if (error instanceof CliError) throw error;
    throw new CliError('config', `cannot create the key file ${path}: ${(error as Error).message}`);
  } finally {
    await rm(temporary, { force: true });
    stopWatching();
  }
  return key;
}

/** Links `temporary` to `path` (EEXIST when a file is there); false: no hard links here. */
async function linked(temporary: string, path: string): Promise<boolean> {
  try {
    await link(temporary, path);
    return true;
  } catch (error) {
    if (NO_LINKS.has((error as { code?: string }).code ?? '')) return false;
    throw error;
  }
}

/**
 * Where the file system has no hard links: renames the whole `temporary` to `path`, so that no
 * reader (another job of the host) and no crash ever meets a key file half written, as an
 * exclusive copy left it. A rename replaces what is there, so it runs under a lock of its own
 * and only while no key file exists (EEXIST otherwise): a key another login has just made, and
 * bound its tokens to, is never replaced.
 */
async function renamedIfNone(temporary: string, path: string): Promise<void> {
  const release = await takeLock(`${path}.lock`, LOCK_WAIT_MS, `the making of the key file`);
  try {
    if (await exists(path)) throw Object.assign(new Error('exists'), { code: 'EEXIST' });
    await rename(temporary, path);
  } finally {
    await release();
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return false;
    throw error;
  }
}

/**
 * The key of a login that keeps it in `path`, checked to be the key its tokens are bound to
 * (`thumbprint`). A missing, open or foreign file is a config error that says so.
 */
export async function readKeyFile(path: string, thumbprint: string): Promise<DpopKey> {
  const key = await keyInFile(path);
  if (key === undefined) {
    throw new CliError(
      'config',
      `the key file ${path} does not exist: a login that keeps its key apart works only ` +
        'where its key file is (REALMGATE_KEY_FILE names another place)',
    );
  }
  if ((await thumbprintOf(key)) !== thumbprint) {
    throw new CliError(
      'config',
      `the key in ${path} is not the key this login is bound to; log in again with it`,
    );
  }
  return key;
}

/** What `link` answers where the file system has no hard links. */
const NO_LINKS = new Set(['EPERM', 'ENOTSUP', 'ENOSYS', 'EOPNOTSUPP']);

/** The key in `path`; undefined when there is no such file. */
async function keyInFile(path: string): Promise<DpopKey | undefined> {
  const text = await readPrivateText(path);
  if (text === undefined) return undefined;
  let key: unknown;
  try {
    key = JSON.parse(text);
  } catch {
    key = undefined;
  }
  if (!isDpopKey(key)) throw new CliError('config', `${path} is not a P-256 private key (JWK)`);
  return key;
}
