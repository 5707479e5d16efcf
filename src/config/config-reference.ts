import { z } from 'zod';
import { configSchema, FILE_SETTINGS, RENAMED_SETTINGS, requiredSecrets } from './config.ts';
import { fileVariableOf } from './setting-files.ts';

/**
 * The configuration reference of docs/configuration.md, generated from the schema so that it
 * cannot drift from what realmgate reads: one row per setting, then the settings it refuses.
 * `npm run docs:config` writes it (write-config-reference.ts); a unit test fails when the
 * committed table differs.
 */

/** The lines the generated table sits between; the prose around them is written by hand. */
export const REFERENCE_START = '<!-- generated from src/config/config.ts: npm run docs:config -->';
export const REFERENCE_END = '<!-- end of the generated configuration reference -->';

/** One row: the variable, what holds when it is unset, what it means (Markdown). */
export interface ReferenceRow {
  variable: string;
  shownDefault: string;
  meaning: string;
}

/** The input default of a setting: the value `.default()` gives, looked for through pipes. */
function defaultOf(schema: z.ZodType): unknown {
  if (schema instanceof z.ZodDefault) return schema.def.defaultValue;
  if (schema instanceof z.ZodPipe) return defaultOf(schema.def.in as z.ZodType);
  return undefined;
}

/**
 * What the reference shows as a setting's default: the schema's `shownDefault`, else "required"
 * for a required secret, else the schema's default value; undefined when there is none of them.
 */
function shownDefaultOf(name: string, schema: z.ZodType): string | undefined {
  const given = z.globalRegistry.get(schema)?.['shownDefault'];
  if (typeof given === 'string') return given;
  if ((requiredSecrets as readonly string[]).includes(name)) return 'required outside demo mode';
  const value = defaultOf(schema);
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') {
    return `\`${String(value)}\``;
  }
  return undefined;
}

/** The rows of every setting in schema order, then of each refused one. */
export function referenceRows(): ReferenceRow[] {
  const settings = Object.entries(configSchema.shape).map(([name, schema]): ReferenceRow => {
    const description = z.globalRegistry.get(schema)?.description;
    if (description === undefined) throw new Error(`${name}: no description in the schema`);
    const shownDefault = shownDefaultOf(name, schema);
    if (shownDefault === undefined) throw new Error(`${name}: no default and no shownDefault`);
    const fromFile = (FILE_SETTINGS as readonly string[]).includes(name)
      ? `; or \`${fileVariableOf(name)}\``
      : '';
    return { variable: `\`${name}\``, shownDefault, meaning: `${description}${fromFile}` };
  });
  const refused = Object.entries(RENAMED_SETTINGS).map(([name, instead]): ReferenceRow => ({
    variable: `\`${name}\``,
    shownDefault: '(refused)',
    meaning: `no longer read, and a configuration that still sets it is refused: ${instead}`,
  }));
  return [...settings, ...refused];
}

/**
 * The rows as a Markdown table, columns padded as prettier pads them (so `prettier --check`
 * passes on the generated file without running prettier here); the test checks that it does.
 */
export function renderReferenceTable(rows: readonly ReferenceRow[]): string {
  const cells = [
    ['variable', 'default', 'meaning'],
    ...rows.map((row) => [row.variable, row.shownDefault, row.meaning]),
  ].map((line) => line.map((cell) => cell.replaceAll('|', '\\|')));
  const widths = [0, 1, 2].map((i) => Math.max(3, ...cells.map((line) => line[i]!.length)));
  const line = (values: readonly string[]) =>
    `| ${values.map((value, i) => value.padEnd(widths[i]!)).join(' | ')} |`;
  const [header, ...body] = cells;
  return [
    line(header!),
    line(widths.map((width) => '-'.repeat(width))),
    ...body.map((values) => line(values)),
  ].join('\n');
}

/** `document` with the text between the markers replaced by `table`. */
export function withReferenceTable(document: string, table: string): string {
  const start = document.indexOf(REFERENCE_START);
  const end = document.indexOf(REFERENCE_END);
  if (start < 0 || end < start) {
    throw new Error(`the markers ${REFERENCE_START} and ${REFERENCE_END} are missing`);
  }
  return `${document.slice(0, start + REFERENCE_START.length)}\n\n${table}\n\n${document.slice(end)}`;
}
