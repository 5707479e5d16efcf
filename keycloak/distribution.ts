import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile, mkdtemp } from 'node:fs/promises';
import { homedir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The one Keycloak version realmgate is tested against (same as @keycloak/keycloak-admin-client). */
export const KEYCLOAK_VERSION = '26.7.4';

/** Databases the local launcher runs Keycloak on: embedded H2 (the default) or PostgreSQL. */
export type KeycloakDb = 'dev-file' | 'postgres';

/** Build-time options: changing them forces a rebuild of the cached distribution. */
export function keycloakBuildOptions(db: KeycloakDb = 'dev-file'): string[] {
  return [
    `--db=${db}`,
    '--http-relative-path=/auth',
    '--health-enabled=true',
    '--metrics-enabled=false',
  ];
}

/** The build options of the default (H2) distribution. */
export const KEYCLOAK_BUILD_OPTIONS = keycloakBuildOptions('dev-file');

/** Where the fetched and built distribution lives: outside git, shared by every checkout. */
export function defaultCacheDir(): string {
  const base = process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache');
  return process.env.REALMGATE_CACHE_DIR ?? path.join(base, 'realmgate');
}

type Log = (message: string) => void;

/**
 * The cached home of one build-option set. `--db` is a build option, so each database kind has
 * a home of its own, built once: switching between H2 and PostgreSQL never rebuilds. The H2
 * home keeps the name it always had.
 */
export function keycloakHomeDir(cacheDir: string, db: KeycloakDb): string {
  return path.join(cacheDir, `keycloak-${KEYCLOAK_VERSION}${homeSuffix(db)}`);
}

function homeSuffix(db: KeycloakDb): string {
  return db === 'dev-file' ? '' : `-${db}`;
}

/**
 * Returns the home folder of a Keycloak distribution built for `db` (default H2), fetching it
 * through Maven (which keeps its own download cache) and running `kc.sh build` only when needed.
 */
export async function ensureKeycloakHome(
  options: { cacheDir?: string; log?: Log; db?: KeycloakDb } = {},
): Promise<string> {
  const cacheDir = options.cacheDir ?? defaultCacheDir();
  const log = options.log ?? (() => undefined);
  const db = options.db ?? 'dev-file';
  const home = keycloakHomeDir(cacheDir, db);
  const marker = path.join(home, '.realmgate-build');
  const buildOptions = keycloakBuildOptions(db);
  const wanted = buildOptions.join(' ');
  if (existsSync(marker) && (await readFile(marker, 'utf8')) === wanted) return home;

  await mkdir(cacheDir, { recursive: true });
  return withLock(path.join(cacheDir, `.lock-${KEYCLOAK_VERSION}${homeSuffix(db)}`), async () => {
    if (existsSync(marker) && (await readFile(marker, 'utf8')) === wanted) return home;
    if (!existsSync(path.join(home, 'bin', 'kc.sh'))) {
      await fetchDistribution(cacheDir, home, log);
    }
    log(`building Keycloak ${KEYCLOAK_VERSION} (${wanted}); this happens once`);
    await run(path.join(home, 'bin', 'kc.sh'), ['build', ...buildOptions], {
      maxBuffer: 64 * 1024 * 1024,
    });
    await writeFile(marker, wanted);
    return home;
  });
}

async function fetchDistribution(cacheDir: string, home: string, log: Log): Promise<void> {
  const artifact = `org.keycloak:keycloak-quarkus-dist:${KEYCLOAK_VERSION}:tar.gz`;
  log(`fetching ${artifact} through Maven`);
  const downloads = path.join(cacheDir, 'downloads');
  await run(
    'mvn',
    ['-q', '-B', 'dependency:copy', `-Dartifact=${artifact}`, `-DoutputDirectory=${downloads}`],
    { maxBuffer: 64 * 1024 * 1024 },
  );
  // Extract next to the final place, then rename, so a killed run never leaves half a tree.
  const staging = await mkdtemp(path.join(cacheDir, 'extract-'));
  try {
    const archive = path.join(downloads, `keycloak-quarkus-dist-${KEYCLOAK_VERSION}.tar.gz`);
    await run('tar', ['-xzf', archive, '-C', staging]);
    await rm(home, { recursive: true, force: true });
    await rename(path.join(staging, `keycloak-${KEYCLOAK_VERSION}`), home);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
}

/** A cross-process lock on a folder name; a stale lock (older than 15 minutes) is taken over. */
async function withLock<T>(lockDir: string, work: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    try {
      await mkdir(lockDir);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      if (Date.now() > deadline) {
        await rm(lockDir, { recursive: true, force: true });
        continue;
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
  try {
    return await work();
  } finally {
    await rm(lockDir, { recursive: true, force: true });
  }
}
