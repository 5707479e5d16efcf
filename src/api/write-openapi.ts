import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { openApiDocument } from './openapi.ts';

/**
 * Writes the OpenAPI document `GET /api/openapi.json` serves to a file, so `redocly lint` can
 * read it (`npm run openapi:lint`). The file is generated, never committed: the document lives
 * comes from the route tables and `openapi.ts`. Usage: `write-openapi.ts [file]`.
 */
const file = resolve(process.argv[2] ?? 'node_modules/.cache/realmgate/openapi.json');
mkdirSync(dirname(file), { recursive: true });
writeFileSync(file, `${JSON.stringify(openApiDocument, null, 2)}\n`);
console.log(`OpenAPI document written to ${file}`);
