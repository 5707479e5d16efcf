import {
  FILTER_OPTIONS,
  FORMAT_OPTION,
  ORDER_OPTION,
  readFilters,
  readFormat,
  readOrder,
} from './audit-filters.ts';
import {
  exportTo,
  listRecords,
  TABLE_HEADER,
  tableRowOf,
  type ListRequest,
} from './audit-reading.ts';
import {
  readKeys,
  unanchoredNotice,
  unpinnedNotice,
  unsignedNotice,
  verifyExport,
} from './audit-verify.ts';
import { sessionCommand, type CommandEntry } from './command-spec.ts';
import { usageError } from './errors.ts';
import type { CommandOutput, RunContext } from './io.ts';
import { printedJson } from './printed-json.ts';
import { checkRealm } from './values.ts';

export { verifyExport };

/** `--max`: a whole number of records, at least one. */
function readMax(text: string | undefined): number {
  if (text === undefined) return 100;
  if (!/^\d{1,9}$/.test(text) || Number(text) < 1) throw usageError('--max: a number, at least 1');
  return Number(text);
}

/**
 * `audit list --json`: `{records, total, next}` as `JSON.stringify(.., null, 2)` lays it out,
 * written record by record as the pages come, so that `--all` over a log of millions holds a
 * page in memory, not the log. `total` and `next` are the last page's: they come last.
 */
async function listJson(request: ListRequest, context: RunContext): Promise<CommandOutput> {
  const { stdout } = context.io;
  let printed = 0;
  stdout.write('{\n  "records": [');
  const listed = await listRecords(request, context, (page) => {
    for (const record of page) {
      const lines = printedJson(record).replaceAll('\n', '\n    ');
      stdout.write(`${printed++ === 0 ? '' : ','}\n    ${lines}`);
    }
  });
  const close = printed === 0 ? ']' : '\n  ]';
  stdout.write(`${close},\n  "total": ${listed.total},\n  "next": ${listed.next ?? 'null'}\n}\n`);
  return { nothing: true };
}

/**
 * `realmgate audit list|export <log>` (master's, or an organization's: through its own stored
 * login when there is one, else as a platform administrator), and `audit verify FILE
 * [--keys URL|FILE]` (offline unless the keys are fetched).
 */
export const AUDIT_COMMANDS: readonly CommandEntry[] = [
  sessionCommand({
    name: 'audit list',
    positionals: ['realm'],
    options: {
      ...FILTER_OPTIONS,
      order: ORDER_OPTION,
      max: { value: 'n' },
      all: {},
      json: {},
    },
    parse: (args) => {
      if (args.has('all') && args.one('max') !== undefined) {
        throw usageError('audit list takes either --max or --all');
      }
      return {
        log: checkRealm(args.at(0), '<realm>'),
        filters: readFilters(args),
        order: readOrder(args.one('order')),
        max: args.has('all') ? undefined : readMax(args.one('max')),
        json: args.has('json'),
      };
    },
    run: async (command, context) => {
      if (command.json) return listJson(command, context);
      const { stdout } = context.io;
      stdout.write(TABLE_HEADER);
      const listed = await listRecords(command, context, (page) => {
        for (const record of page) stdout.write(tableRowOf(record));
      });
      const more = listed.next === null ? '' : ` (more: --max, or --all)`;
      return { text: `${listed.shown} of ${listed.total} records${more}` };
    },
  }),
  sessionCommand({
    name: 'audit export',
    positionals: ['realm'],
    options: {
      ...FILTER_OPTIONS,
      format: FORMAT_OPTION,
      out: { value: 'file', required: true },
    },
    parse: (args) => {
      const query = readFilters(args);
      query.set('format', readFormat(args.one('format')));
      return { log: checkRealm(args.at(0), '<realm>'), query, file: args.one('out')! };
    },
    run: async ({ log, query, file }, context) => ({
      json: { file, format: query.get('format'), bytes: await exportTo(file, log, query, context) },
    }),
  }),
  sessionCommand({
    name: 'audit verify',
    positionals: ['file'],
    options: { keys: { value: 'url|file' } },
    parse: (args) => ({ file: args.at(0), keys: args.one('keys') }),
    run: async ({ file, keys }, context) => {
      const verified = await verifyExport(
        file,
        keys === undefined ? undefined : await readKeys(keys),
      );
      // Beside the answer, on stderr: what it does not prove (stdout stays the JSON).
      const notices = [unanchoredNotice, unsignedNotice, unpinnedNotice].map((of) => of(verified));
      for (const notice of notices) {
        if (notice !== undefined) context.io.stderr.write(`realmgate: ${notice}\n`);
      }
      return { json: verified };
    },
  }),
];
