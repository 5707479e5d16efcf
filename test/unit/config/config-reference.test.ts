import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as prettier from 'prettier';
import { describe, expect, it } from 'vitest';
import { configSchema, FILE_SETTINGS } from '../../../src/config/config.ts';
import {
  REFERENCE_END,
  REFERENCE_START,
  referenceRows,
  renderReferenceTable,
  withReferenceTable,
} from '../../../src/config/config-reference.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const file = path.join(root, 'docs/configuration.md');
const committed = readFileSync(file, 'utf8');
const generated = withReferenceTable(committed, renderReferenceTable(referenceRows()));

describe('the configuration reference (docs/configuration.md)', () => {
  it('is the table the schema generates', () => {
    // toBe's diff shows the rows that differ; the message says how to fix it.
    expect(committed, 'docs/configuration.md is stale: run `npm run docs:config`').toBe(generated);
  });

  it('is already formatted as prettier formats it (npm run lint)', async () => {
    const options = await prettier.resolveConfig(file);
    expect(await prettier.check(generated, { ...options, filepath: file })).toBe(true);
  });

  it('has a row for every setting, in schema order, then the refused ones', () => {
    const names = referenceRows().map((row) => row.variable.replaceAll('`', ''));
    expect(names).toEqual([
      ...Object.keys(configSchema.shape),
      'LOGIN_MAX_FAILURES_PER_USER',
      'BASIC_REFUSAL_CACHE_SECONDS',
      'LOGIN_WAIT_SECONDS',
    ]);
  });

  it('names <NAME>_FILE in the row of each setting read from a file, and in no other', () => {
    for (const row of referenceRows()) {
      const name = row.variable.replaceAll('`', '');
      expect(row.meaning.includes(`\`${name}_FILE\``), name).toBe(
        (FILE_SETTINGS as readonly string[]).includes(name),
      );
    }
  });

  it('shows the schema defaults, and what holds when a setting without one is unset', () => {
    const shown = Object.fromEntries(
      referenceRows().map((row) => [row.variable.replaceAll('`', ''), row.shownDefault]),
    );
    expect(shown['PORT']).toBe('`8000`');
    expect(shown['PUBLIC_URL']).toBe('`http://localhost:8000`');
    // The input default, not what it becomes: `auto` would show this machine's core count.
    expect(shown['WORKERS']).toBe(`\`${String(configSchema.shape.WORKERS.in.def.defaultValue)}\``);
    expect(shown['METRICS_ENABLED']).toBe('`true`');
    expect(shown['REVOCATION_CHECK_SECONDS']).toBe('`60`');
    expect(shown['KEYCLOAK_CLIENT_SECRET']).toBe('required outside demo mode');
    expect(shown['DATABASE_URL']).toBe('(embedded PGlite in `DATA_DIR`)');
    expect(shown['LOGIN_MAX_FAILURES_PER_USER']).toBe('(refused)');
  });

  it('is rewritten only between its markers', () => {
    const document = `# Title\n\nprose\n\n${REFERENCE_START}\n\nold table\n\n${REFERENCE_END}\n\nmore prose\n`;
    expect(withReferenceTable(document, '| new |')).toBe(
      `# Title\n\nprose\n\n${REFERENCE_START}\n\n| new |\n\n${REFERENCE_END}\n\nmore prose\n`,
    );
    expect(() => withReferenceTable('# Title\n', '| new |')).toThrow(/markers/);
  });
});
