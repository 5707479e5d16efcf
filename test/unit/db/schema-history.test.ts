import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { MIGRATION_NAMES } from '../../../src/db/migrate.ts';
import {
  compareVersions,
  readableFrom,
  RELEASES,
  schemaVerdict,
  type Release,
} from '../../../src/db/schema-history.ts';
import { VERSION } from '../../../src/release/version.ts';

/*
 * The migration rule's checkable half (the other runs the previous release's code on today's
 * schema: test/integration/release-compat.test.ts): migrations only ever append, and what a
 * replica decides at start about a database others migrated.
 */

const migrationsDir = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../../../src/db/migrations',
);

describe('the migration list', () => {
  it('only appends: every release shipped a prefix of the next one and of today', () => {
    expect(RELEASES.length).toBeGreaterThan(0);
    const lists = [...RELEASES.map((r) => r.migrations), MIGRATION_NAMES];
    for (let i = 1; i < lists.length; i++) {
      const [before, after] = [lists[i - 1]!, lists[i]!];
      expect(after.slice(0, before.length), `release ${RELEASES[i]?.version ?? 'today'}`).toEqual(
        before,
      );
    }
  });

  it('records releases oldest first, each with its code, up to this version', () => {
    const versions = RELEASES.map((r) => r.version);
    expect([...versions].sort(compareVersions)).toEqual(versions);
    expect(new Set(versions).size).toBe(versions.length);
    expect(compareVersions(VERSION, versions.at(-1)!)).toBeGreaterThanOrEqual(0);
    for (const release of RELEASES) expect(release.ref, release.version).toMatch(/^\S+$/);
  });

  it('is every file of src/db/migrations, named by date and number, in order', () => {
    const files = readdirSync(migrationsDir)
      .filter((f) => f.endsWith('.ts'))
      .map((f) => f.replace(/\.ts$/, ''))
      .sort();
    expect([...MIGRATION_NAMES]).toEqual(files);
    for (const name of MIGRATION_NAMES) expect(name).toMatch(/^\d{8}-\d{3}-[a-z0-9-]+$/);
  });
});

describe('compareVersions', () => {
  it('compares numerically, part by part', () => {
    expect(compareVersions('0.10.0', '0.9.9')).toBeGreaterThan(0);
    expect(compareVersions('1.2.3', '1.2.3')).toBe(0);
    expect(compareVersions('0.2.0', '1.0.0')).toBeLessThan(0);
  });
});

const history: Release[] = [
  { version: '0.1.0', ref: 'a', migrations: ['m1', 'm2'] },
  { version: '0.2.0', ref: 'b', migrations: ['m1', 'm2'] },
  { version: '0.3.0', ref: 'c', migrations: ['m1', 'm2', 'm3'] },
];

describe('readableFrom: the oldest release that may run on the schema a migration run made', () => {
  it('is the release before, for a release as released (rule: N-1 runs on N)', () => {
    expect(readableFrom('0.3.0', ['m1', 'm2', 'm3'], history)).toBe('0.2.0');
    // 0.2.0 added no migration: its schema is 0.1.0's, and 0.1.0 runs on it.
    expect(readableFrom('0.2.0', ['m1', 'm2'], history)).toBe('0.1.0');
    expect(readableFrom('0.1.0', ['m1', 'm2'], history)).toBe('0.1.0');
  });

  it('is the last release, for code with migrations added since', () => {
    expect(readableFrom('0.3.0', ['m1', 'm2', 'm3', 'm4'], history)).toBe('0.3.0');
    expect(readableFrom('0.4.0', ['m1', 'm2', 'm3', 'm4'], history)).toBe('0.3.0');
  });

  it('is the version itself with no release its migrations extend', () => {
    expect(readableFrom('0.1.0', ['x1'], history)).toBe('0.1.0');
  });
});

describe('schemaVerdict: what a replica does at start', () => {
  const known = ['m1', 'm2', 'm3'];

  it('migrates an empty, older or current database', () => {
    for (const applied of [[], ['m1'], ['m1', 'm2', 'm3']]) {
      expect(schemaVerdict('0.3.0', known, applied, undefined)).toEqual({ kind: 'migrate' });
    }
  });

  it('runs, migrating nothing, on the schema of the next release when that release says it may', () => {
    expect(
      schemaVerdict('0.3.0', known, ['m1', 'm2', 'm3', 'm4'], {
        readableFrom: '0.3.0',
        migratedBy: '0.4.0',
      }),
    ).toEqual({ kind: 'newer', unknown: ['m4'] });
  });

  it('refuses a schema more than one release ahead, saying who migrated it and who may run', () => {
    const verdict = schemaVerdict('0.3.0', known, ['m1', 'm2', 'm3', 'm4', 'm5'], {
      readableFrom: '0.4.0',
      migratedBy: '0.5.0',
    });
    expect(verdict.kind).toBe('refuse');
    expect(verdict).toMatchObject({
      reason: expect.stringMatching(
        /^the database was migrated by realmgate 0\.5\.0 \(migrations unknown here: m4, m5\), whose schema realmgate 0\.4\.0 and later can run on; this is realmgate 0\.3\.0, more than one release back\. .*restore the backup/,
      ) as unknown,
    });
  });

  it('refuses unknown migrations without a record of who may run on them', () => {
    const verdict = schemaVerdict('0.3.0', known, ['m1', 'm2', 'm3', 'm4'], undefined);
    expect(verdict).toMatchObject({
      kind: 'refuse',
      reason: expect.stringContaining('does not know (m4) and no record') as unknown,
    });
  });

  it('refuses a history that is not its own: a migration missing, or others in their place', () => {
    for (const applied of [['m2'], ['m1', 'x2'], ['m1', 'm3', 'm2', 'm4']]) {
      const verdict = schemaVerdict('0.3.0', known, applied, {
        readableFrom: '0.1.0',
        migratedBy: '0.3.0',
      });
      expect(verdict, applied.join()).toMatchObject({
        kind: 'refuse',
        reason: expect.stringContaining("not this release's history") as unknown,
      });
    }
  });
});
