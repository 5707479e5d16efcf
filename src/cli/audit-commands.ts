import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { createChainFollower, type AuditRecord } from '../audit/audit-chain.ts';
import {
  FILTER_OPTIONS,
  FORMAT_OPTION,
  ORDER_OPTION,
  readFilters,
  readFormat,
  readOrder,
} from './audit-filters.ts';
import { exportTo, listRecords, TABLE_HEADER, tableRowOf } from './audit-reading.ts';
import { sessionCommand, type CommandEntry } from './command-spec.ts';
import { CliError, usageError } from './errors.ts';
import { checkRealm } from './values.ts';

/** What `audit verify` found in a whole export. */
interface Verified {
  records: number;
  org: string | null;
  firstSeq: number | null;
  lastSeq: number | null;
  /** The hash of the last record: what the next export's first `prevHash` must be. */
  lastHash: string | null;
}

/**
 * Follows a JSON Lines export of an audit log (docs/audit.md) record by record, without holding
 * it in memory; the first record that does not fit its chain fails the command, named by its
 * sequence number and line.
 */
export async function verifyExport(file: string): Promise<Verified> {
  const follower = createChainFollower();
  const verified: Verified = {
    records: 0,
    org: null,
    firstSeq: null,
    lastSeq: null,
    lastHash: null,
  };
  let line = 0;
  const lines = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  try {
    for await (const text of lines) {
      line++;
      if (text.trim() === '') continue;
      const record = recordOf(text, line);
      const misfit = follower.next(record);
      if (misfit !== undefined) {
        throw new CliError(
          'verification',
          `record ${record.seq} (line ${line}) does not fit: ${misfit}.`,
        );
      }
      verified.records++;
      verified.org ??= record.org;
      verified.firstSeq ??= record.seq;
      verified.lastSeq = record.seq;
      verified.lastHash = record.hash;
    }
  } catch (err) {
    if (err instanceof CliError) throw err;
    throw new CliError('config', `cannot read ${file}: ${(err as Error).message}`);
  }
  return verified;
}

function recordOf(text: string, line: number): AuditRecord {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new CliError('verification', `line ${line} is not JSON: not an audit log export.`);
  }
  const record = value as Partial<AuditRecord>;
  if (
    typeof record !== 'object' ||
    record === null ||
    typeof record.hash !== 'string' ||
    typeof record.seq !== 'number' ||
    typeof record.details !== 'object'
  ) {
    throw new CliError('verification', `line ${line} is not an audit record.`);
  }
  return record as AuditRecord;
}

/** `--max`: a whole number of records, at least one. */
function readMax(text: string | undefined): number {
  if (text === undefined) return 100;
  if (!/^\d{1,9}$/.test(text) || Number(text) < 1) throw usageError('--max: a number, at least 1');
  return Number(text);
}

/**
 * `realmgate audit list|export <log>` (master's, or an organization's: through its own stored
 * login when there is one, else as a platform administrator), and `audit verify FILE`
 * (offline, no login needed).
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
        log: checkRealm(args.at(0)),
        filters: readFilters(args),
        order: readOrder(args.one('order')),
        max: args.has('all') ? undefined : readMax(args.one('max')),
        json: args.has('json'),
      };
    },
    run: async (command, context) => {
      const { stdout } = context.io;
      const records: unknown[] = [];
      if (!command.json) stdout.write(TABLE_HEADER);
      const listed = await listRecords(command, context, (page) => {
        if (command.json) records.push(...page);
        else for (const record of page) stdout.write(tableRowOf(record));
      });
      if (command.json) return { json: { total: listed.total, records, next: listed.next } };
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
      return { log: checkRealm(args.at(0)), query, file: args.one('out')! };
    },
    run: async ({ log, query, file }, context) => ({
      json: { file, format: query.get('format'), bytes: await exportTo(file, log, query, context) },
    }),
  }),
  sessionCommand({
    name: 'audit verify',
    positionals: ['file'],
    parse: (args) => ({ file: args.at(0) }),
    run: async ({ file }) => ({ json: await verifyExport(file) }),
  }),
];
