import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { bundleCli, cliManifest } from '../../../packages/cli/build.ts';
import { buildInfo, readRevision, REVISION_VARIABLE } from '../../../src/release/build-info.ts';
import { VERSION } from '../../../src/release/version.ts';

/*
 * One version, written once: the root package.json's. Everything else that shows it (the CLI,
 * its package, the gateway's start log and metrics, the image's labels) reads it from there.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const json = (file: string) =>
  JSON.parse(readFileSync(path.join(root, file), 'utf8')) as Record<string, unknown>;
const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();

describe('the version', () => {
  it("is the root package.json's, in semantic versioning", () => {
    expect(VERSION).toBe(json('package.json').version);
    expect(VERSION).toMatch(/^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$/);
  });

  it('is written nowhere else: the CLI package takes it when built, npm keeps the lock in step', async () => {
    expect(json('packages/cli/package.json')).not.toHaveProperty('version');
    const manifest = await cliManifest();
    expect(manifest).toMatchObject({ name: 'realmgate-cli', version: VERSION });
    expect(manifest).not.toHaveProperty('scripts');
    // package-lock.json is npm's record of package.json: `npm version` writes both.
    const lock = json('package-lock.json') as {
      version: string;
      packages: Record<string, { version?: string }>;
    };
    expect([lock.version, lock.packages['']?.version]).toEqual([VERSION, VERSION]);
  });
});

describe("the CLI's bundle", () => {
  it("holds the root manifest's version and nothing else of it", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'realmgate-cli-bundle-'));
    try {
      const outfile = path.join(dir, 'realmgate.js');
      const inputs = await bundleCli(outfile, { format: 'esm', target: 'node20', shebang: true });
      expect(inputs).toContain('package.json');
      const bundle = readFileSync(outfile, 'utf8');
      expect(bundle).toContain(JSON.stringify(VERSION));
      // The gateway's description and dependency list stay out.
      for (const absent of [String(json('package.json').description), 'knex-pglite']) {
        expect(bundle).not.toContain(absent);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the revision', () => {
  it('is REALMGATE_REVISION when that is a commit id, as images are built', () => {
    const commit = 'a'.repeat(40);
    expect(readRevision({ [REVISION_VARIABLE]: commit }, root)).toBe(commit);
    expect(readRevision({ [REVISION_VARIABLE]: ` ${'B'.repeat(12)}\n` }, root)).toBe(
      'b'.repeat(12),
    );
  });

  it('is the commit checked out when the variable is unset or not a commit id', () => {
    expect(readRevision({}, root)).toBe(head);
    for (const value of ['', 'unknown', 'main', 'abc', '$(id)', 'g'.repeat(40)]) {
      expect(readRevision({ [REVISION_VARIABLE]: value }, root), value).toBe(head);
    }
  });

  it('is unknown outside a checkout without the variable', () => {
    const elsewhere = mkdtempSync(path.join(tmpdir(), 'realmgate-not-a-checkout-'));
    try {
      expect(readRevision({}, elsewhere)).toBe('unknown');
      expect(readRevision({ [REVISION_VARIABLE]: 'unknown' }, elsewhere)).toBe('unknown');
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('goes into the build facts with the version and the running Node', () => {
    expect(buildInfo({})).toEqual({
      version: VERSION,
      revision: head,
      nodeVersion: process.versions.node,
    });
  });
});
