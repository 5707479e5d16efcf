import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  changelogSection,
  checkVersion,
  publicSource,
  ReleaseError,
} from '../../../scripts/release.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

const changelog = [
  '# Changelog',
  '',
  '## [Unreleased]',
  '',
  '## [0.3.0] - 2026-12-01',
  '',
  '### Added',
  '- a thing',
  '',
  '## [0.2.0] - 2026-11-27',
  '',
  '### Added',
  '- the first release',
  '',
].join('\n');

describe('checkVersion', () => {
  it('takes X.Y.Z above the last release', () => {
    expect(checkVersion('0.2.0', '0.1.0')).toBe('0.2.0');
    expect(checkVersion('0.10.0', '0.9.0')).toBe('0.10.0');
  });

  it('refuses anything else, saying what it wants', () => {
    for (const [asked, message] of [
      [undefined, /usage: npm run release -- X\.Y\.Z/],
      ['v0.2.0', /usage/],
      ['0.2', /usage/],
      ['0.2.0-rc.1', /usage/],
      ['0.1.0', /not above the last release, 0\.1\.0/],
      ['0.0.9', /not above/],
    ] as const) {
      expect(() => checkVersion(asked, '0.1.0'), String(asked)).toThrow(message);
    }
  });
});

describe('changelogSection', () => {
  it("is the version's section, up to the next one", () => {
    expect(changelogSection(changelog, '0.3.0', '2026-12-01')).toBe('### Added\n- a thing');
    expect(changelogSection(changelog, '0.2.0', '2026-12-01')).toBe(
      '### Added\n- the first release',
    );
  });

  it('refuses a missing, undated, future or empty section', () => {
    expect(() => changelogSection(changelog, '0.4.0', '2026-12-01')).toThrow(
      new ReleaseError('CHANGELOG.md has no section "## [0.4.0] - YYYY-MM-DD"'),
    );
    expect(() => changelogSection('## [0.4.0]\n- x\n', '0.4.0', '2026-12-01')).toThrow(
      /is not dated/,
    );
    expect(() => changelogSection('## [0.4.0] - 2026-13-45\n- x\n', '0.4.0', '2027-01-01')).toThrow(
      /is not dated/,
    );
    expect(() => changelogSection(changelog, '0.3.0', '2026-11-30')).toThrow(/after today/);
    expect(() =>
      changelogSection('## [0.4.0] - 2026-12-01\n\n## [0.3.0]', '0.4.0', '2026-12-01'),
    ).toThrow(/is empty/);
  });

  it("holds CHANGELOG.md's own sections to the same shape", async () => {
    const { readFile } = await import('node:fs/promises');
    const text = await readFile(path.join(root, 'CHANGELOG.md'), 'utf8');
    const versions = [...text.matchAll(/^## \[(\d+\.\d+\.\d+)\]/gm)].map((m) => m[1]!);
    expect(versions.length).toBeGreaterThan(0);
    for (const version of versions) {
      expect(changelogSection(text, version, '9999-12-31'), version).toContain('###');
    }
  });
});

describe('publicSource', () => {
  it('drops credentials from a remote URL, keeps scp-like ones, unknown without a public remote', () => {
    expect(publicSource('https://user:secret@example.test/org/realmgate.git\n')).toBe(
      'https://example.test/org/realmgate.git',
    );
    expect(publicSource('git@example.test:org/realmgate.git')).toBe(
      'git@example.test:org/realmgate.git',
    );
    expect(publicSource('')).toBe('unknown');
    for (const local of ['/work/main', '../realmgate', 'file:///srv/git/realmgate.git']) {
      expect(publicSource(local), local).toBe('unknown');
    }
  });
});

describe('scripts/release.ts in a repository of its own', () => {
  // A copy of the script and the files it reads first, in a new git repository: its refusals,
  // each before it changes anything, without touching this checkout.
  let dir: string;
  const git = (...args: string[]) =>
    promisify(execFile)('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.test', ...args], {
      cwd: dir,
    });
  const release = (...args: string[]) =>
    promisify(execFile)(process.execPath, ['scripts/release.ts', ...args], { cwd: dir }).then(
      () => ({ code: 0, stderr: '' }),
      (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
    );

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'realmgate-release-'));
    await mkdir(path.join(dir, 'scripts'));
    await mkdir(path.join(dir, 'src/db'), { recursive: true });
    await copyFile(path.join(root, 'scripts/release.ts'), path.join(dir, 'scripts/release.ts'));
    await writeFile(
      path.join(dir, 'src/db/released-migrations.json'),
      JSON.stringify({ releases: [{ version: '0.2.0', ref: 'v0.2.0', migrations: ['m1'] }] }),
    );
    await writeFile(path.join(dir, 'CHANGELOG.md'), changelog);
    await git('init', '--quiet', '--initial-branch', 'topic');
    await git('add', '.');
    await git('commit', '--quiet', '-m', 'start');
  }, 30_000);

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses, in order: the version, the branch, changes, the tag, the changelog', async () => {
    expect(await release('0.2.0')).toEqual({
      code: 1,
      stderr: 'release: 0.2.0 is not above the last release, 0.2.0\n',
    });
    expect(await release('0.3.0')).toEqual({
      code: 1,
      stderr: 'release: releases are made on main, this is topic\n',
    });
    await git('checkout', '--quiet', '-b', 'main');
    await writeFile(path.join(dir, 'CHANGELOG.md'), `${changelog}\nmore\n`);
    expect(await release('0.3.0')).toEqual({
      code: 1,
      stderr: 'release: the tree has changes: commit or stash them first\n',
    });
    await git('checkout', '--quiet', 'CHANGELOG.md');
    await git('tag', 'v0.3.0');
    expect(await release('0.3.0')).toEqual({
      code: 1,
      stderr: 'release: the tag v0.3.0 exists already\n',
    });
    expect(await release('0.4.0')).toEqual({
      code: 1,
      stderr: 'release: CHANGELOG.md has no section "## [0.4.0] - YYYY-MM-DD"\n',
    });
    // Six Node processes and as many git commands, on a machine other tests keep busy.
  }, 60_000);
});
