import { execFile } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

/*
 * vitest compiles TypeScript itself, so a passing suite does not show that plain Node runs the
 * sources. This loads every module of the gateway and the CLI in a child `node` (the one running
 * the tests: Node 24 under `npm test` and CI), which strips the types as `node src/main.ts` and
 * the Docker image do. It catches what tsc lets through: a relative import written `./x.js`, a
 * JSON import without its `with { type: 'json' }`.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function tsFiles(dir: string): string[] {
  return readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => path.posix.join(dir, f.split(path.sep).join('/')));
}

describe('native TypeScript', () => {
  it('runs on Node 24', () => {
    expect(Number(process.versions.node.split('.')[0]), 'run the tests with `npm test`').toBe(24);
  });

  it('loads every module of src/ and keycloak/ with plain node, no loader', async () => {
    const files = [...tsFiles('src'), ...tsFiles('keycloak')];
    expect(files.length).toBeGreaterThan(50);
    // Scripts (no export: src/main.ts, keycloak/install.ts, ...) act when imported, so they are
    // only stripped, which fails on syntax Node cannot erase; what they import is loaded anyway.
    const isScript = (f: string) => !/^export\s/m.test(readFileSync(path.join(root, f), 'utf8'));
    const child = [
      "import { readFileSync } from 'node:fs';",
      "import { stripTypeScriptTypes } from 'node:module';",
      `for (const f of ${JSON.stringify(files.filter(isScript))}) {`,
      "  stripTypeScriptTypes(readFileSync(f, 'utf8'));",
      '}',
      `for (const f of ${JSON.stringify(files.filter((f) => !isScript(f)))}) {`,
      '  await import(`./${f}`);',
      '}',
    ].join('\n');
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      // stripTypeScriptTypes is still marked experimental; type stripping itself is not.
      ['--disable-warning=ExperimentalWarning', '--input-type=module', '--eval', child],
      { cwd: root, timeout: 30_000 },
    );
    expect(stdout).toBe('');
    expect(stderr).toBe('');
  }, 30_000);
});
