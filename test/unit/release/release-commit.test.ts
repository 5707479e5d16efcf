import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Release } from '../../../src/db/schema-history.ts';
import { previousRelease, releaseCommit } from '../../helpers/release-commit.ts';

/*
 * A repository shaped as realmgate's history will be: release 0.1.0 recorded by commit id after
 * the fact, then `npm run release -- 0.2.0`'s commit (recording 0.2.0 with ref v0.2.0) tagged,
 * then more work. Its clones: one plain (tags fetched), one without tags, as CI may make.
 */

let dir: string;
const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.test', ...args], {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
let origin: string;
const commits: Record<string, string> = {};
const releases: Release[] = [];

async function commit(name: string, recorded: Release[]): Promise<void> {
  await writeFile(
    path.join(origin, 'src/db/released-migrations.json'),
    `${JSON.stringify({ releases: recorded }, null, 2)}\n`,
  );
  await writeFile(path.join(origin, 'work.txt'), name);
  git(origin, 'add', '.');
  git(origin, 'commit', '--quiet', '-m', name);
  commits[name] = git(origin, 'rev-parse', 'HEAD');
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'realmgate-release-commit-'));
  origin = path.join(dir, 'origin');
  await mkdir(path.join(origin, 'src/db'), { recursive: true });
  git(origin, 'init', '--quiet', '--initial-branch', 'main');
  await commit('the 0.1.0 code', []);
  await commit('more work', []);
  releases.push({ version: '0.1.0', ref: commits['the 0.1.0 code']!.slice(0, 7), migrations: [] });
  await commit('0.1.0 recorded', releases);
  releases.push({ version: '0.2.0', ref: 'v0.2.0', migrations: [] });
  await commit('Release 0.2.0', releases);
  git(origin, 'tag', '--annotate', '-m', 'realmgate 0.2.0', 'v0.2.0');
  await commit('after 0.2.0', releases);
  git(dir, 'clone', '--quiet', origin, 'plain');
  git(dir, 'clone', '--quiet', '--no-tags', origin, 'tagless');
}, 30_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('releaseCommit', () => {
  it('finds each release in a clone with tags and in one without', () => {
    for (const clone of ['plain', 'tagless']) {
      const root = path.join(dir, clone);
      expect(releaseCommit(root, releases[0]!), clone).toBe(commits['the 0.1.0 code']);
      expect(releaseCommit(root, releases[1]!), clone).toBe(commits['Release 0.2.0']);
    }
    expect(git(path.join(dir, 'tagless'), 'tag')).toBe('');
  });

  it('the previous release: on the release commit the one before it, after it that release', () => {
    const root = path.join(dir, 'tagless');
    expect(previousRelease(root, releases).release.version).toBe('0.2.0');
    git(root, 'checkout', '--quiet', commits['Release 0.2.0']!);
    expect(previousRelease(root, releases)).toEqual({
      release: releases[0],
      commit: commits['the 0.1.0 code'],
    });
    git(root, 'checkout', '--quiet', 'main');
  });

  it('refuses a tag moved off the commit that recorded its release', () => {
    const root = path.join(dir, 'plain');
    git(root, 'tag', '--force', 'v0.2.0', commits['after 0.2.0']!);
    expect(() => releaseCommit(root, releases[1]!)).toThrow(/the tag v0\.2\.0 names .* was moved/);
    git(root, 'tag', '--force', 'v0.2.0', commits['Release 0.2.0']!);
  });

  it('says what is missing in a shallow clone', () => {
    git(dir, 'clone', '--quiet', '--depth', '1', `file://${origin}`, 'shallow');
    const root = path.join(dir, 'shallow');
    expect(() => releaseCommit(root, releases[0]!)).toThrow(
      /release 0\.1\.0's code \([0-9a-f]{7}\) is not in this clone: .*unshallow/,
    );
    expect(() => releaseCommit(root, releases[1]!)).toThrow(/release 0\.2\.0's code .*unshallow/);
  });
});
