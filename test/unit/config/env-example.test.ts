import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { configSchema, FILE_SETTINGS, loadConfig } from '../../../src/config/config.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const example = readFileSync(path.join(root, '.env.example'), 'utf8');
const schemaKeys = Object.keys(configSchema.shape);

/** `KEY=value` lines at line start, in file order. */
const assignments = example
  .split('\n')
  .map((line) => /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line))
  .filter((m) => m !== null)
  .map((m) => ({ key: m[1]!, value: m[2]! }));

describe('.env.example', () => {
  it('documents every configuration variable', () => {
    const documented = assignments.map((a) => a.key);
    expect(schemaKeys.filter((k) => !documented.includes(k))).toEqual([]);
  });

  it('documents nothing that is not a configuration variable', () => {
    expect(assignments.map((a) => a.key).filter((k) => !schemaKeys.includes(k))).toEqual([]);
  });

  it('lists each variable once', () => {
    const keys = assignments.map((a) => a.key);
    expect(keys.filter((k, i) => keys.indexOf(k) !== i)).toEqual([]);
    expect(keys.length).toBe(schemaKeys.length);
  });

  it('leaves empty exactly the variables without a default', () => {
    const defaults: Record<string, unknown> = loadConfig({ REALMGATE_DEMO: 'true' });
    const withoutDefault = Object.keys(configSchema.shape).filter(
      (key) => defaults[key] === undefined,
    );
    expect(withoutDefault.length).toBeGreaterThan(0);
    expect(
      assignments
        .filter((a) => a.value === '')
        .map((a) => a.key)
        .sort(),
    ).toEqual(withoutDefault.sort());
  });

  it('shows NAME_FILE, commented out, right below each setting that may come from a file', () => {
    const lines = example.split('\n');
    const shown = lines
      .map((line, i) => ({ name: /^# ([A-Z][A-Z0-9_]*)_FILE=$/.exec(line)?.[1], i }))
      .filter((found): found is { name: string; i: number } => found.name !== undefined);
    expect(shown.map((found) => found.name)).toEqual([...FILE_SETTINGS]);
    for (const { name, i } of shown) expect(lines[i - 1], name).toBe(`${name}=`);
  });

  it('shows the real defaults', () => {
    const env = Object.fromEntries(assignments.map((a) => [a.key, a.value]));
    // Demo mode so that the unset secrets are not reported.
    const fromExample = loadConfig({ ...env, REALMGATE_DEMO: 'true' });
    const fromDefaults = loadConfig({ REALMGATE_DEMO: 'true' });
    expect(fromExample).toEqual(fromDefaults);
    expect(env['REALMGATE_DEMO']).toBe('false');
  });
});
