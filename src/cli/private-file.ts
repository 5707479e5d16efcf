import type { Stats } from 'node:fs';
import { lstat, open } from 'node:fs/promises';
import { CliError } from './errors.ts';

// The credentials file and a key file hold what makes a login: read only when this user alone
// could have written them, as ssh reads a private key. A mode check alone lets another user
// plant a 0600 file of theirs where the directory lets them (a shared CONFIG_DIR, /tmp): a
// realmgate run as root would then use their logins, and bind new tokens to their key.

/**
 * The text of a file only its owner may read (the credentials file, a key file); undefined when
 * it does not exist. One other users can read, one another user owns, or a symbolic link another
 * user made, is refused, saying why.
 */
export async function readPrivateText(path: string): Promise<string | undefined> {
  try {
    await refuseForeignLink(path);
    // Checked on the file opened, not on the path: what is read is what was checked.
    const handle = await open(path, 'r');
    try {
      refuseUnprivate(path, await handle.stat());
      return await handle.readFile('utf8');
    } finally {
      await handle.close();
    }
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return undefined;
    if (error instanceof CliError) throw error;
    throw new CliError('config', `cannot read ${path}: ${(error as Error).message}`);
  }
}

/** This process's user; undefined where there are no user ids (Windows). */
function ownUid(): number | undefined {
  return process.getuid?.();
}

/**
 * A symbolic link at `path` is followed when this user or root made it (a dotfiles manager, a
 * mounted secret); one another user made could point anywhere they like.
 */
async function refuseForeignLink(path: string): Promise<void> {
  const uid = ownUid();
  const link = await lstat(path);
  if (uid === undefined || !link.isSymbolicLink() || link.uid === uid || link.uid === 0) return;
  throw new CliError(
    'config',
    `${path} is a symbolic link another user (uid ${link.uid}) made; move it away and log in again`,
  );
}

function refuseUnprivate(path: string, info: Stats): void {
  const uid = ownUid();
  if (uid !== undefined && info.uid !== uid) {
    throw new CliError(
      'config',
      `${path} belongs to another user (uid ${info.uid}), not to this one (uid ${uid}); ` +
        'move it away and log in again',
    );
  }
  const mode = info.mode & 0o777;
  if ((mode & 0o077) !== 0) {
    throw new CliError(
      'config',
      `${path} is open to other users (mode ${mode.toString(8)}); run chmod 600 ${path}`,
    );
  }
}
