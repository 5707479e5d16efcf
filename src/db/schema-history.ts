import released from './released-migrations.json' with { type: 'json' };

/*
 * Which code may run on which schema, by the rule of docs/operations.md ("Upgrades and
 * migrations"): release N+1's migrations only add (expand) what release N can ignore, and drop
 * only what release N no longer reads (contract, one release later). So the code of release N
 * runs on schema N+1, and during a rolling upgrade or a rollback of one release the old replicas
 * keep serving. What goes further back is refused at start, with the reason.
 */

/** One release as released-migrations.json records it: the migrations it shipped. */
export interface Release {
  version: string;
  /**
   * Its code in git: a commit id, or the tag `npm run release` wrote (the compatibility test
   * finds a tag's commit without the tag: test/helpers/release-commit.ts).
   */
  ref: string;
  migrations: readonly string[];
}

/**
 * Every release so far, oldest first (scripts/release.sh appends one per release). The first,
 * 0.1.0, is main as it ran before versions existed (commit 61f6d5f).
 */
export const RELEASES: readonly Release[] = released.releases;

/** `1.2.3` against `1.10.0`, numerically: negative, zero or positive. */
export function compareVersions(a: string, b: string): number {
  const parts = (v: string) => v.split('.').map((n) => Number.parseInt(n, 10) || 0);
  const [x, y] = [parts(a), parts(b)];
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const difference = (x[i] ?? 0) - (y[i] ?? 0);
    if (difference !== 0) return difference;
  }
  return 0;
}

const isPrefix = (prefix: readonly string[], of: readonly string[]) =>
  prefix.length <= of.length && prefix.every((name, i) => of[i] === name);

/**
 * The oldest release whose code may run on the schema that `migrations` (the code of `version`)
 * make: what a migration run records for the replicas that follow.
 * - `version` as released, its migrations unchanged: the release before it (rule: N-1 runs on N);
 * - code past its last release (migrations added since): that release;
 * - otherwise, the newest release whose migrations these extend, or `version` itself.
 */
export function readableFrom(
  version: string,
  migrations: readonly string[],
  releases: readonly Release[] = RELEASES,
): string {
  const own = releases.findIndex((r) => r.version === version);
  const ownRelease = releases[own];
  if (ownRelease && ownRelease.migrations.length === migrations.length) {
    if (isPrefix(ownRelease.migrations, migrations)) return releases[Math.max(0, own - 1)]!.version;
  }
  const extended = releases.findLast((r) => isPrefix(r.migrations, migrations));
  return extended?.version ?? version;
}

/** What the database's migrations, and its record of who may read it, mean for this code. */
export type SchemaVerdict =
  /** Nothing applied that this code does not know: migrate what is missing, then serve. */
  | { kind: 'migrate' }
  /** Migrated by a newer release whose schema this code may run on: serve, migrate nothing. */
  | { kind: 'newer'; unknown: string[] }
  /** This code must not run here: why, in words an operator acts on. */
  | { kind: 'refuse'; reason: string };

/** Who migrated the database last, and from which release on code may run on it. */
export interface SchemaRecord {
  readableFrom: string;
  migratedBy: string;
}

const listed = (names: readonly string[]) => (names.length ? names.join(', ') : 'none');
const HELP =
  'Run a release that can read this database, or restore the backup taken before the upgrade ' +
  '(docs/operations.md, "Upgrades and migrations").';

/**
 * Decides whether the code of `version`, which knows `known` migrations, may start on a database
 * that has `applied` (in order) and carries `record` (absent before release 0.2.0).
 */
export function schemaVerdict(
  version: string,
  known: readonly string[],
  applied: readonly string[],
  record: SchemaRecord | undefined,
): SchemaVerdict {
  if (isPrefix(applied, known)) return { kind: 'migrate' };
  if (!isPrefix(known, applied)) {
    return {
      kind: 'refuse',
      reason:
        `the database's migrations are not this release's history (applied: ${listed(applied)}; ` +
        `realmgate ${version} has: ${listed(known)}). ${HELP}`,
    };
  }
  const unknown = applied.slice(known.length);
  if (!record) {
    return {
      kind: 'refuse',
      reason:
        `the database has migrations realmgate ${version} does not know (${listed(unknown)}) and ` +
        `no record of which releases may run on it. ${HELP}`,
    };
  }
  if (compareVersions(version, record.readableFrom) < 0) {
    return {
      kind: 'refuse',
      reason:
        `the database was migrated by realmgate ${record.migratedBy} (migrations unknown here: ` +
        `${listed(unknown)}), whose schema realmgate ${record.readableFrom} and later can run ` +
        `on; this is realmgate ${version}, more than one release back. ${HELP}`,
    };
  }
  return { kind: 'newer', unknown };
}
