import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { chmod, mkdir, open, rename, unlink } from 'node:fs/promises';
import { dirname, isAbsolute, join } from 'node:path';
import { takeLock } from './credentials-lock.ts';
import { isDpopKey, type DpopKey } from './dpop.ts';
import { CliError } from './errors.ts';
import { cleanUpIfStopped } from './on-stop.ts';
import { readPrivateText } from './private-file.ts';

/**
 * One `realmgate login`: the refresh token of an offline session, and the access token last
 * obtained with it (reused until shortly before it expires). Kept in `credentials.json`.
 */
export interface StoredLogin {
  /** The gateway's base URL as `REALMGATE_URL` gives it, ending with `/`. */
  gateway: string;
  realm: string;
  /** As Keycloak spells it (lowercase); compared without regard to case. */
  username: string;
  /** The offline session (`sid` claim): what `logout` revokes, and what `tokens list` shows as id. */
  sessionId: string;
  refreshToken: string;
  /** ISO 8601; absent when Keycloak gave no lifetime. */
  refreshExpiresAt?: string;
  /** ISO 8601; the most recent login is the default one. */
  loggedInAt: string;
  accessToken?: string;
  /** ISO 8601, when `accessToken` expires. */
  accessExpiresAt?: string;
  /**
   * The private key the refresh and access tokens are bound to (DPoP); absent: bearer tokens
   * (`--no-dpop`, a realm that does not offer it, or a login made before the CLI bound them).
   */
  dpopKey?: DpopKey;
  /**
   * Instead of `dpopKey`: the file of its own the key is kept in (`login --key-file`), and the
   * key's thumbprint (the tokens' `cnf.jkt`), so a copy of this file is a token without its key.
   */
  keyFile?: string;
  keyThumbprint?: string;
  /**
   * The gateway's own address (its PUBLIC_URL, ending with `/`) that the login's proofs name:
   * learnt at login, or REALMGATE_CANONICAL_URL; an answer naming another one is refused. Absent
   * for a bearer login, and one made before the CLI kept it.
   */
  canonicalUrl?: string;
}

/** What picks a stored login: `--realm` and `--user`, each optional. */
export interface LoginSelector {
  realm?: string;
  user?: string;
}

const FILE_NAME = 'credentials.json';
const FORMAT_VERSION = 1;

/**
 * The credentials file: `$REALMGATE_CONFIG_DIR/credentials.json`, else under
 * `$XDG_CONFIG_HOME/realmgate/`, else `~/.config/realmgate/`. Undefined when the environment
 * names no home at all (nothing is stored then).
 */
export function credentialsPathOf(env: Record<string, string | undefined>): string | undefined {
  if (env.REALMGATE_CONFIG_DIR) return join(env.REALMGATE_CONFIG_DIR, FILE_NAME);
  // The XDG spec says to ignore a relative XDG_CONFIG_HOME.
  const xdg = env.XDG_CONFIG_HOME;
  if (xdg && isAbsolute(xdg)) return join(xdg, 'realmgate', FILE_NAME);
  if (env.HOME) return join(env.HOME, '.config', 'realmgate', FILE_NAME);
  return undefined;
}

/**
 * Reads the stored logins; none when the file does not exist. A file other users can read or
 * another user owns, or one that is not what this module writes, is refused rather than used or
 * overwritten.
 */
export async function readLogins(path: string): Promise<StoredLogin[]> {
  const text = await readPrivateText(path);
  if (text === undefined) return [];
  let file: unknown;
  try {
    file = JSON.parse(text);
  } catch {
    file = undefined;
  }
  const logins = (file as { logins?: unknown } | undefined)?.logins;
  const version = (file as { version?: unknown } | undefined)?.version;
  if (version !== FORMAT_VERSION || !Array.isArray(logins) || !logins.every(isStoredLogin)) {
    throw new CliError(
      'config',
      `${path} is not a realmgate credentials file; move it away and log in again`,
    );
  }
  return logins;
}

/**
 * Replaces the file with `logins`, never exposing it: a new file created with mode 0600 in the
 * same directory (made 0700 when it makes it), then renamed over the old one, so a reader sees
 * the old or the new content whole; a stopping signal removes the new file, and only a crash
 * (SIGKILL, power loss) can leave it behind. `beforeRename` runs once the new file is whole,
 * right before the rename, and may still refuse it (by throwing).
 */
export async function writeLogins(
  path: string,
  logins: readonly StoredLogin[],
  beforeRename: () => Promise<void> = () => Promise.resolve(),
): Promise<void> {
  const dir = dirname(path);
  await makeDirectory(dir);
  const temporary = join(dir, `.${FILE_NAME}.${randomBytes(6).toString('hex')}.tmp`);
  const text = `${JSON.stringify({ version: FORMAT_VERSION, logins }, null, 2)}\n`;
  // A realmgate stopped meanwhile (Ctrl-C, a CI cancel) removes the file on its way out: left
  // behind, it would be a copy of the refresh tokens nothing reads or ever removes. Watched from
  // before it exists, so no moment of its life is missed (its name is this writer's alone).
  const stopWatching = cleanUpIfStopped(() => rmSync(temporary, { force: true }));
  try {
    // `wx`: never follow or reuse something already at that name.
    const handle = await open(temporary, 'wx', 0o600);
    try {
      try {
        await handle.chmod(0o600); // whatever the umask
        await handle.writeFile(text, 'utf8');
        await handle.sync();
      } finally {
        await handle.close();
      }
      await beforeRename();
      await rename(temporary, path);
    } catch (error) {
      await unlink(temporary).catch(() => {});
      throw error;
    }
  } finally {
    stopWatching();
  }
}

/**
 * Makes the directory of the credentials file when it does not exist, 0700 whatever the umask.
 * One that exists is left as it is: REALMGATE_CONFIG_DIR may name a folder the user keeps other
 * things in (a project's); the file itself is 0600, which is what keeps it private.
 */
async function makeDirectory(dir: string): Promise<void> {
  if ((await mkdir(dir, { recursive: true, mode: 0o700 })) !== undefined) await chmod(dir, 0o700);
}

/** How long a writer waits for the lock before it gives up. */
export const LOCK_WAIT_MS = 10_000;
/**
 * Reads the logins, applies `change` and writes the result (unless `change` returns
 * undefined), while holding `credentials.json.lock`: two realmgate processes that update the
 * file at once (a `login` and a `token` in parallel scripts) would otherwise each write what
 * they read, and one's change would be lost. Returns the logins as they are afterwards.
 */
export async function updateLogins(
  path: string,
  change: (logins: StoredLogin[]) => StoredLogin[] | undefined,
): Promise<StoredLogin[]> {
  return withLockedLogins(path, LOCK_WAIT_MS, 'a change of the credentials file', (logins) => {
    const changed = change(logins);
    return Promise.resolve({ logins: changed, value: changed ?? logins });
  });
}

/**
 * Runs `work` on the logins as they are, holding `credentials.json.lock` until it is done (a
 * request included), and writes the `logins` it returns (none: nothing is written). Waits up
 * to `waitMs` for another process's hold to end; `purpose` says what the hold is for to those
 * that wait for it. Returns what `work` returns as `value`.
 */
export async function withLockedLogins<T>(
  path: string,
  waitMs: number,
  purpose: string,
  work: (logins: StoredLogin[]) => Promise<{ logins?: StoredLogin[]; value: T }>,
): Promise<T> {
  const release = await inWritableDirectory(path, async () => {
    await makeDirectory(dirname(path));
    return takeLock(`${path}.lock`, waitMs, purpose);
  });
  try {
    const { logins, value } = await work(await readLogins(path));
    // A holder stopped (SIGSTOP, a suspended VM) past the lock's stale time may have had its
    // lock taken over, and another process may have written meanwhile: what this one read is
    // then out of date, and writing it would undo that change. So the lock is checked as late
    // as can be, with the new file already whole, and only the rename follows.
    if (logins !== undefined) {
      await inWritableDirectory(path, () => writeLogins(path, logins, release.ensureHeld));
    }
    return value;
  } finally {
    await release();
  }
}

/**
 * Runs a write next to `path`; a directory that cannot be made or written (a file in its path,
 * a read-only file system) is the user's configuration to fix, so it is said as such rather
 * than as a stack trace.
 */
async function inWritableDirectory<T>(path: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (error instanceof CliError) throw error;
    const code = (error as { code?: unknown }).code;
    const reason = typeof code === 'string' ? code : (error as Error).message;
    throw new CliError('config', `cannot write the credentials in ${dirname(path)} (${reason})`);
  }
}

/** Whether two logins have the same key: gateway URL, realm and user. */
export function isSameLogin(a: StoredLogin, b: StoredLogin): boolean {
  return (
    a.gateway === b.gateway &&
    a.realm === b.realm &&
    a.username.toLowerCase() === b.username.toLowerCase()
  );
}

/** `logins` with `login` in place of the one with the same key (or added). */
export function withLogin(logins: readonly StoredLogin[], login: StoredLogin): StoredLogin[] {
  const index = logins.findIndex((other) => isSameLogin(other, login));
  if (index === -1) return [...logins, login];
  return logins.map((other, i) => (i === index ? login : other));
}

/** `logins` without the one with the same key as `login`. */
export function withoutLogin(logins: readonly StoredLogin[], login: StoredLogin): StoredLogin[] {
  return logins.filter((other) => !isSameLogin(other, login));
}

/**
 * The login to use at `gateway`: among those matching `--realm` and `--user` (each when given),
 * the one logged in most recently.
 */
export function selectLogin(
  logins: readonly StoredLogin[],
  gateway: string,
  selector: LoginSelector,
): StoredLogin | undefined {
  const user = selector.user?.toLowerCase();
  return logins
    .filter((login) => login.gateway === gateway)
    .filter((login) => selector.realm === undefined || login.realm === selector.realm)
    .filter((login) => user === undefined || login.username.toLowerCase() === user)
    .reduce<StoredLogin | undefined>(
      (latest, login) =>
        latest === undefined || Date.parse(login.loggedInAt) > Date.parse(latest.loggedInAt)
          ? login
          : latest,
      undefined,
    );
}

function isStoredLogin(value: unknown): value is StoredLogin {
  if (typeof value !== 'object' || value === null) return false;
  const login = value as Record<string, unknown>;
  const text = (key: string) => typeof login[key] === 'string' && login[key] !== '';
  const optional = (key: string) => login[key] === undefined || typeof login[key] === 'string';
  return (
    ['gateway', 'realm', 'username', 'sessionId', 'refreshToken', 'loggedInAt'].every(text) &&
    ['refreshExpiresAt', 'accessToken', 'accessExpiresAt', 'canonicalUrl'].every(optional) &&
    (login.dpopKey === undefined || isDpopKey(login.dpopKey)) &&
    // A key kept apart is named with its thumbprint, and never beside a key kept here.
    (login.keyFile === undefined
      ? login.keyThumbprint === undefined
      : text('keyFile') && text('keyThumbprint') && login.dpopKey === undefined)
  );
}
