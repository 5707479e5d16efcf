import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { referenceRows, renderReferenceTable, withReferenceTable } from './config-reference.ts';

/**
 * Rewrites the configuration table of docs/configuration.md from the schema (`npm run
 * docs:config`); the prose around it stays as written. Usage: `write-config-reference.ts [file]`.
 */
const file = resolve(process.argv[2] ?? 'docs/configuration.md');
const document = readFileSync(file, 'utf8');
const updated = withReferenceTable(document, renderReferenceTable(referenceRows()));
writeFileSync(file, updated);
console.log(updated === document ? `${file} is up to date` : `${file} rewritten`);
