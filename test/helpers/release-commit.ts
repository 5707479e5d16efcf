import { execFileSync } from 'node:child_process';
import type { Release } from '../../src/db/schema-history.ts';

/*
 * The commit of a release's code, from what any full clone has: CI clones may come without tags
 * (`git clone --no-tags`, a checkout action's default fetch), so a release's tag is never needed.
 * - A ref that is a commit id (0.1.0's, recorded after the fact): that commit.
 * - A tag (what `npm run release` records: it cannot write the id of the commit it is making):
 *   the commit that added the release to released-migrations.json, which is the commit
 *   `npm run release` tagged. Where the tag is present too, it must name that same commit.
 */

const RELEASES_FILE = 'src/db/released-migrations.json';
const COMMIT_ID = /^[0-9a-f]{7,40}$/;

/** The full id of the commit holding `release`'s code, in the repository at `root`. */
export function releaseCommit(root: string, release: Release): string {
  const git = (...args: string[]) =>
    execFileSync('git', args, {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    }).trim();
  const missing = (what: string) =>
    new Error(
      `release ${release.version}'s code (${what}) is not in this clone: it needs the history ` +
        '(git fetch --unshallow; a shallow clone has none)',
    );
  // A shallow clone's oldest commit would look as if it added every release.
  if (git('rev-parse', '--is-shallow-repository') === 'true') throw missing(release.ref);
  if (COMMIT_ID.test(release.ref)) {
    try {
      return git('rev-parse', '--verify', '--quiet', `${release.ref}^{commit}`);
    } catch {
      throw missing(`commit ${release.ref}`);
    }
  }
  // -S: the commits that change how often the string occurs in the file; the oldest added it.
  const recording = git(
    'log',
    '--reverse',
    '--format=%H',
    '-S',
    `"version": "${release.version}"`,
    '--',
    RELEASES_FILE,
  ).split('\n')[0];
  if (!recording) throw missing(`the commit that recorded it in ${RELEASES_FILE}`);
  let tagged: string | undefined;
  try {
    tagged = git('rev-parse', '--verify', '--quiet', `refs/tags/${release.ref}^{commit}`);
  } catch {
    tagged = undefined; // no such tag in this clone: the recording commit is the answer
  }
  if (tagged && tagged !== recording) {
    throw new Error(
      `the tag ${release.ref} names ${tagged}, but release ${release.version} was recorded in ` +
        `${RELEASES_FILE} by ${recording}: the tag was moved`,
    );
  }
  return recording;
}

/**
 * The newest release before the code at `root`'s HEAD: the last one recorded whose commit is
 * not HEAD (on the release commit itself, the one before it).
 */
export function previousRelease(
  root: string,
  releases: readonly Release[],
): { release: Release; commit: string } {
  const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  for (const release of [...releases].reverse()) {
    const commit = releaseCommit(root, release);
    if (commit !== head) return { release, commit };
  }
  throw new Error('released-migrations.json records no release before this commit');
}
