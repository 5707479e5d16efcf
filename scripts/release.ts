import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import process from 'node:process';
import { fileURLToPath, pathToFileURL } from 'node:url';

/*
 * Makes a release (docs/operations.md, "Releases"):
 *
 *   npm run release -- 0.2.0      (node scripts/release.ts 0.2.0 on Node 24)
 *
 * Checks: on branch main, the tree clean, no tag vX.Y.Z yet, a version above the last release,
 * CHANGELOG.md's dated section for it, typecheck, lint and the unit tests. Then sets the version
 * (package.json and package-lock.json, through npm; the Helm chart's version and appVersion
 * in charts/realmgate/Chart.yaml), records the release's migrations
 * (src/db/released-migrations.json), commits, tags vX.Y.Z (annotated, with the changelog
 * section) and, when Docker answers, builds the image realmgate:X.Y.Z with its labels. It
 * pushes nothing: it prints the commands that do.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const RELEASES_FILE = 'src/db/released-migrations.json';
const CHART_FILE = 'charts/realmgate/Chart.yaml';
const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$/;

/** A release that cannot be made, and why. */
export class ReleaseError extends Error {}

/** `1.2.3` against `1.10.0`, numerically. */
function compare(a: string, b: string): number {
  const [x, y] = [a.split('.').map(Number), b.split('.').map(Number)];
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return 0;
}

/** The version asked for, if it is X.Y.Z and above the last release's. */
export function checkVersion(asked: string | undefined, lastReleased: string): string {
  if (!asked || !SEMVER.test(asked)) {
    throw new ReleaseError(`usage: npm run release -- X.Y.Z (semantic versioning), not ${asked}`);
  }
  if (compare(asked, lastReleased) <= 0) {
    throw new ReleaseError(`${asked} is not above the last release, ${lastReleased}`);
  }
  return asked;
}

/**
 * The body of CHANGELOG.md's section `## [version] - YYYY-MM-DD` (Keep a Changelog), checked:
 * the section is there, dated no later than `today` (YYYY-MM-DD), and says something.
 */
export function changelogSection(changelog: string, version: string, today: string): string {
  const heading = new RegExp(`^## \\[${version.replaceAll('.', '\\.')}\\](.*)$`, 'm');
  const found = heading.exec(changelog);
  if (!found) throw new ReleaseError(`CHANGELOG.md has no section "## [${version}] - YYYY-MM-DD"`);
  const date = /^ - (\d{4}-\d{2}-\d{2})$/.exec(found[1]!)?.[1];
  if (!date || Number.isNaN(Date.parse(`${date}T00:00:00Z`))) {
    throw new ReleaseError(
      `CHANGELOG.md's section for ${version} is not dated: "## [${version}] - YYYY-MM-DD"`,
    );
  }
  if (date > today) throw new ReleaseError(`CHANGELOG.md dates ${version} ${date}, after today`);
  const rest = changelog.slice(found.index + found[0].length);
  const next = /^## /m.exec(rest);
  const body = (next ? rest.slice(0, next.index) : rest).trim();
  if (body === '') throw new ReleaseError(`CHANGELOG.md's section for ${version} is empty`);
  return body;
}

/**
 * A remote's URL without any user or password in it, for the image's `source` label; `unknown`
 * for no remote or one only this machine can reach (a path, `file:`).
 */
export function publicSource(remote: string): string {
  const trimmed = remote.trim();
  // scp-like `git@host:owner/repo.git`: nothing secret in it.
  if (/^[\w.-]+@[\w.-]+:[^/]/.test(trimmed)) return trimmed;
  if (!URL.canParse(trimmed)) return 'unknown';
  const url = new URL(trimmed);
  if (!['https:', 'http:', 'ssh:', 'git:'].includes(url.protocol)) return 'unknown';
  url.username = '';
  url.password = '';
  return url.href.replace(/\/$/, '');
}

/**
 * The chart's Chart.yaml with its `version` and `appVersion` set to the release's: the chart
 * and the image it runs are versioned with the gateway (test/unit/chart/chart-version.test.ts).
 */
export function chartWithVersion(chartYaml: string, version: string): string {
  let updated = chartYaml;
  for (const [field, value] of [
    ['version', version],
    ['appVersion', `'${version}'`],
  ] as const) {
    const line = new RegExp(`^${field}: .*$`, 'm');
    if (!line.test(updated)) throw new ReleaseError(`${CHART_FILE} has no "${field}:" line`);
    updated = updated.replace(line, `${field}: ${value}`);
  }
  return updated;
}

/** Runs a command in the checkout; its output shown (`inherit`) or returned. */
function run(command: string, args: string[], inherit = false): string {
  try {
    return execFileSync(command, args, {
      cwd: root,
      encoding: 'utf8',
      stdio: inherit ? 'inherit' : ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    // Its own output said why; nothing was committed or tagged after a failed check.
    if (inherit) throw new ReleaseError(`${command} ${args.join(' ')} failed (above)`);
    throw error;
  }
}
const git = (...args: string[]) => run('git', args).trim();
const say = (line: string) => process.stdout.write(`release: ${line}\n`);

interface ReleasedMigrations {
  releases: Array<{ version: string; ref: string; migrations: string[] }>;
}

async function release(asked: string | undefined): Promise<void> {
  const file = path.join(root, RELEASES_FILE);
  const recorded = JSON.parse(readFileSync(file, 'utf8')) as ReleasedMigrations;
  const version = checkVersion(asked, recorded.releases.at(-1)?.version ?? '0.0.0');
  const tag = `v${version}`;

  const branch = git('rev-parse', '--abbrev-ref', 'HEAD');
  if (branch !== 'main') throw new ReleaseError(`releases are made on main, this is ${branch}`);
  if (git('status', '--porcelain') !== '') {
    throw new ReleaseError('the tree has changes: commit or stash them first');
  }
  if (git('tag', '--list', tag) !== '') throw new ReleaseError(`the tag ${tag} exists already`);
  const today = new Date().toISOString().slice(0, 10);
  const notes = changelogSection(
    readFileSync(path.join(root, 'CHANGELOG.md'), 'utf8'),
    version,
    today,
  );

  for (const script of ['typecheck', 'lint', 'test:unit']) {
    say(`npm run ${script}`);
    run('npm', ['run', script], true);
  }

  say(`version ${version}: package.json, package-lock.json, ${CHART_FILE}, ${RELEASES_FILE}`);
  run('npm', ['version', version, '--no-git-tag-version', '--allow-same-version']);
  const chartFile = path.join(root, CHART_FILE);
  writeFileSync(chartFile, chartWithVersion(readFileSync(chartFile, 'utf8'), version));
  const migrate = pathToFileURL(path.join(root, 'src/db/migrate.ts')).href;
  const { MIGRATION_NAMES } = (await import(migrate)) as { MIGRATION_NAMES: readonly string[] };
  recorded.releases.push({ version, ref: tag, migrations: [...MIGRATION_NAMES] });
  writeFileSync(file, `${JSON.stringify(recorded, null, 2)}\n`);
  run('npx', ['prettier', '--write', RELEASES_FILE]);
  git('add', 'package.json', 'package-lock.json', CHART_FILE, RELEASES_FILE);
  git('commit', '-m', `Release ${version}`);

  const message = mkdtempSync(path.join(tmpdir(), 'realmgate-release-'));
  try {
    writeFileSync(path.join(message, 'tag'), `realmgate ${version}\n\n${notes}\n`);
    // Verbatim: git would take the changelog's `### Added` headings for comments and drop them.
    git('tag', '--annotate', '--cleanup=verbatim', tag, '--file', path.join(message, 'tag'));
  } finally {
    rmSync(message, { recursive: true, force: true });
  }
  const revision = git('rev-parse', 'HEAD');
  say(`tagged ${tag} at ${revision}`);

  const source = publicSource(tryGit('remote', 'get-url', 'origin'));
  const args = [
    'build',
    ...['--build-arg', `REALMGATE_VERSION=${version}`],
    ...['--build-arg', `REALMGATE_REVISION=${revision}`],
    ...['--build-arg', `REALMGATE_SOURCE=${source}`],
    ...['--build-arg', `REALMGATE_CREATED=${new Date().toISOString().replace(/\.\d{3}Z$/, 'Z')}`],
    ...(process.env.NODE_IMAGE ? ['--build-arg', `NODE_IMAGE=${process.env.NODE_IMAGE}`] : []),
    ...['--tag', `realmgate:${version}`, '--tag', 'realmgate:latest', '.'],
  ];
  if (dockerAnswers()) {
    say(`docker ${args.join(' ')}`);
    run('docker', args, true);
  } else {
    say('Docker does not answer here: no image built. Build it where it does, from the tag:');
    say(`  git checkout ${tag} && docker ${args.join(' ')}`);
  }
  say(`done. To publish: git push origin main ${tag}`);
}

function tryGit(...args: string[]): string {
  try {
    return git(...args);
  } catch {
    return '';
  }
}

function dockerAnswers(): boolean {
  try {
    run('docker', ['info', '--format', '{{.ServerVersion}}']);
    return true;
  } catch {
    return false;
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  release(process.argv[2]).catch((error: unknown) => {
    process.stderr.write(
      `release: ${error instanceof ReleaseError ? error.message : String((error as Error).stack)}\n`,
    );
    process.exit(1);
  });
}
