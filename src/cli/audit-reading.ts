import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { AuditRecord } from '../audit/audit-chain.ts';
import {
  AUDIT_EXPORT_MEDIA_TYPES,
  AUDIT_PAGE_MAX,
  type AuditExportFormat,
} from '../audit/audit-filter-values.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { openDownload } from './client.ts';
import { auditLogPath } from './audit-filters.ts';
import { CliError } from './errors.ts';
import type { RunContext } from './io.ts';
import { callAs, resolveCaller, type Caller } from './stored-login.ts';

const NO_CREDENTIALS =
  'no credentials: set REALMGATE_TOKEN, or REALMGATE_USERNAME and REALMGATE_PASSWORD, of a ' +
  'master-realm user, or log in once with realmgate login <org|master> <username> (an ' +
  "organization's user needs its role _og-audit-log)";

/**
 * Who reads `log`, and where: credentials in the environment are a platform administrator's
 * (as for every administrator's command); else a stored login of the organization itself (its
 * reader) when there is one, else the most recent master-realm login.
 */
async function readerOf(
  log: string,
  env: RunContext['env'],
): Promise<{ caller: Caller; path: string }> {
  if (log !== MASTER_REALM) {
    const own = await resolveCaller(env, { realm: log }, NO_CREDENTIALS).catch(() => undefined);
    if (own?.kind === 'stored') return { caller: own, path: auditLogPath(log, true) };
  }
  const caller = await resolveCaller(env, { realm: MASTER_REALM }, NO_CREDENTIALS);
  return { caller, path: auditLogPath(log, false) };
}

interface Page {
  records: AuditRecord[];
  total: number;
  next: number | null;
}

/** What `audit list` asks for: the filters' query, the order, and how many records at most. */
export interface ListRequest {
  log: string;
  filters: URLSearchParams;
  order: string;
  /** Undefined: every record (`--all`). */
  max: number | undefined;
}

/**
 * The records of a log, page after page (keyset: `after` is the last page's `next`) until `max`
 * records or the last page; `onPage` sees each as it comes, so a long listing is printed as it
 * is read. Pages that would never end (a server answering the same cursor, or an endless chain
 * of them) end the listing with an error: each `next` must move past the cursor in the order
 * asked for, with records on its page, and the records must not outnumber the largest `total`
 * a page counted.
 */
export async function listRecords(
  request: ListRequest,
  context: RunContext,
  onPage: (records: AuditRecord[], total: number) => void,
): Promise<{ total: number; shown: number; next: number | null }> {
  const { caller, path } = await readerOf(request.log, context.env);
  let shown = 0;
  let after: number | null | undefined;
  let total: number;
  let counted = 0;
  const endless = (why: string) =>
    new CliError(
      'api',
      `the audit log pages of ${caller.baseUrl.href} ${why}: stopped after ${shown} records`,
    );
  do {
    const wanted = request.max === undefined ? AUDIT_PAGE_MAX : request.max - shown;
    const query = new URLSearchParams(request.filters);
    query.set('order', request.order);
    query.set('limit', String(Math.min(AUDIT_PAGE_MAX, wanted)));
    if (after !== undefined) query.set('after', String(after));
    const data = await callAs(
      caller,
      { method: 'GET', path: `${path}?${query.toString()}` },
      context.timeoutMs,
    );
    // A success envelope of another shape (another service, a broken proxy) is said so, not
    // read until something in it throws.
    if (!isPage(data)) {
      throw new CliError('api', `the answer of ${caller.baseUrl.href} is not an audit log page`);
    }
    const page = data;
    const { next } = page;
    if (next !== null) {
      const movesOn =
        typeof after !== 'number' || (request.order === 'asc' ? next > after : next < after);
      if (page.records.length === 0 || !movesOn) {
        throw endless(`do not move on (after ${after ?? 'none'} comes ${next})`);
      }
    }
    total = page.total;
    counted = Math.max(counted, total);
    if (shown + page.records.length > counted) {
      throw endless(`go on past the ${counted} records they count`);
    }
    shown += page.records.length;
    onPage(page.records, total);
    after = next;
  } while (after !== null && (request.max === undefined || shown < request.max));
  return { total, shown, next: after };
}

/** The fields the table shows: strings (or null), and numbers for `seq` and `status`. */
const TEXT_FIELDS = [
  'at',
  'action',
  'outcome',
  'actorName',
  'actorId',
  'credential',
  'workspace',
  'result',
  'reason',
  'route',
] as const;

/** Whether `data` is a page as the API answers one: what the listing and the table read of it. */
function isPage(data: unknown): data is Page {
  if (typeof data !== 'object' || data === null) return false;
  const { records, total, next } = data as Record<string, unknown>;
  return (
    Array.isArray(records) &&
    records.every(isRecordRow) &&
    Number.isSafeInteger(total) &&
    (next === null || Number.isSafeInteger(next))
  );
}

function isRecordRow(record: unknown): boolean {
  if (typeof record !== 'object' || record === null || Array.isArray(record)) return false;
  const fields = record as Record<string, unknown>;
  const optional = (value: unknown, type: 'string' | 'number') =>
    value === null || value === undefined || typeof value === type;
  return (
    typeof fields.seq === 'number' &&
    optional(fields.status, 'number') &&
    TEXT_FIELDS.every((name) => optional(fields[name], 'string'))
  );
}

/** The columns of the table, each a record's field as one short text. */
const COLUMNS: [string, number, (r: AuditRecord) => string | null][] = [
  ['SEQ', 7, (r) => String(r.seq)],
  ['AT', 24, (r) => r.at],
  ['ACTION', 24, (r) => r.action],
  ['OUTCOME', 7, (r) => r.outcome],
  ['ACTOR', 20, (r) => r.actorName ?? r.actorId],
  ['CRED', 6, (r) => r.credential],
  ['WORKSPACE', 12, (r) => r.workspace],
  ['STATUS', 9, (r) => r.result ?? (r.status === null ? null : String(r.status))],
  ['REASON', 0, (r) => r.reason ?? r.route],
];

/** Control characters of a stored text are not sent to a terminal. */
// eslint-disable-next-line no-control-regex
const printable = (text: string) => text.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ');

const rowOf = (cells: string[]) =>
  `${cells
    .map((cell, i) => (COLUMNS[i]![1] ? cell.padEnd(COLUMNS[i]![1]) : cell))
    .join(' ')
    .trimEnd()}\n`;

export const TABLE_HEADER = rowOf(COLUMNS.map(([title]) => title));

/** A record as a row of the table. */
export function tableRowOf(record: AuditRecord): string {
  return rowOf(COLUMNS.map(([, , cell]) => printable(cell(record) ?? '-')));
}

/**
 * Streams an export of `log` into `file`: written beside it first and renamed once complete, so
 * a cut download never looks like a whole export. Returns the bytes written. An answer of
 * another media type than the format's (a proxy's sign-in page) is refused, and a download the
 * connection cut is said to be one (exit 3, as the gateway's silence), not a file that could not
 * be written: in both cases no file is left.
 */
export async function exportTo(
  file: string,
  log: string,
  query: URLSearchParams,
  context: RunContext,
): Promise<number> {
  const { caller, path } = await readerOf(log, context.env);
  const { status, mediaType, body } = await callAs(
    caller,
    { method: 'GET', path: `${path}/export?${query.toString()}` },
    context.timeoutMs,
    openDownload,
  );
  const format = (query.get('format') ?? 'jsonl') as AuditExportFormat;
  const expected = AUDIT_EXPORT_MEDIA_TYPES[format];
  if (mediaType !== expected) {
    await body.cancel().catch(() => {});
    throw new CliError(
      'api',
      `error ${status}: the answer of ${caller.baseUrl.href} is ${mediaType ?? 'of no media type'}, ` +
        `not the ${expected} export asked for`,
      undefined,
      status,
    );
  }
  const partial = `${file}.part`;
  let bytes = 0;
  const counted = Readable.fromWeb(body);
  counted.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
  });
  const out = createWriteStream(partial, { flags: 'wx', mode: 0o600 });
  // The side that failed first: a failing one makes the pipeline destroy the other too.
  let failed: 'download' | 'file' | undefined;
  counted.once('error', () => (failed ??= 'download'));
  out.once('error', () => (failed ??= 'file'));
  try {
    await pipeline(counted, out);
    await rename(partial, file);
  } catch (err) {
    await rm(partial, { force: true });
    if (failed === 'download') {
      const cause = (err as { cause?: { code?: unknown } }).cause?.code;
      const reason = typeof cause === 'string' ? cause : (err as Error).message;
      throw new CliError(
        'unreachable',
        `the export from ${caller.baseUrl.href} was cut off after ${bytes} bytes ` +
          `(${printable(reason)}); nothing was written to ${file}: run it again`,
      );
    }
    throw new CliError('config', `cannot write ${file}: ${(err as Error).message}`);
  }
  return bytes;
}
