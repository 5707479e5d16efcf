import type { ErrorCode } from '../envelope/errors.ts';
import { AppError } from '../envelope/errors.ts';
import { routeFor, StreamedAnswer, streamedAnswer, type AnyRoute } from '../http/route-table.ts';
import { administeredRealms, callerRealms, type RealmVariant } from '../platform/path-ids.ts';
import { AUDIT_READER_ROLE, MASTER_REALM } from '../tenancy/identifiers.ts';
import type { Principal } from '../tenancy/principal.ts';
import type { AuditRecord } from './audit-chain.ts';
import { AUDIT_EXPORT_MEDIA_TYPES } from './audit-filter-values.ts';
import { csvLine, CSV_HEADER, jsonLine } from './audit-export.ts';
import { signedJsonLines, type ExportSignatures } from './audit-export-signed.ts';
import { unsignedJsonLines } from './export-end.ts';
import { ocsfEventOf } from './ocsf.ts';
import type { RetentionBounds, RetentionChoices } from './audit-retention.ts';
import type { DeletedRetention } from './deleted-retention.ts';
import type { AuditLogRepo, LogSpan } from './audit-log.repo.ts';
import { readUnderSlot, underSlot, type LongReads } from './long-reads.ts';
import {
  type AuditExportFormat,
  auditExportQuery,
  auditPage,
  auditPageQuery,
  type AuditFilter,
} from './audit-log.schemas.ts';

/** What the reader's routes are served with. */
export interface AuditLogService {
  repo: AuditLogRepo;
  /** Whether an organization exists (an administrator may name any). */
  organizationExists(id: string): Promise<boolean>;
  /** The first record of an organization's log its own readers may read (its creation's). */
  firstSeqOf(org: string): Promise<number>;
  /** The keys and checkpoints a JSON Lines export carries; undefined while the log is off. */
  signatures: ExportSignatures | undefined;
  /** Each log's days, chosen within the platform's bounds (audit-retention.router.ts). */
  retention: { choices: RetentionChoices; bounds: RetentionBounds; deleted: DeletedRetention };
  /**
   * The page reads, exports and downloads this process runs at once (AUDIT_EXPORT_CONCURRENCY),
   * each caller's organization all but one of them, exports never the last page read's.
   */
  longReads: LongReads;
  /**
   * How long the client of an export or a download may hold it back in all (its waits for the
   * client added up) before it is cut and its slot given back (PROXY_ANSWER_DEADLINE_SECONDS).
   */
  stallMs: number;
  now(): number;
}

const route = routeFor<AuditLogService>({ metricsClass: 'list' });

/**
 * Administrators read any log, whole, a deleted organization's included (kept for its
 * retention, whether or not an organization has its id again); an organization's user its own,
 * with the reader's role (who also sets its retention), from the organization's creation on: an
 * id used again does not show its new organization the deleted one's records. (A token narrowed
 * to workspaces reaches none of it: its routes are `beyondWorkspaces`, refused by the admission.)
 * Answers the first record the caller may read.
 */
export async function allowRead(
  service: AuditLogService,
  principal: Principal,
  log: string,
): Promise<number> {
  if (principal.realm === MASTER_REALM) {
    if (
      log !== MASTER_REALM &&
      !(await service.organizationExists(log)) &&
      !(await service.repo.kept(log))
    ) {
      throw new AppError('organizationNotFound');
    }
    return 1;
  }
  if (principal.realm !== log || !principal.realmRoles.includes(AUDIT_READER_ROLE)) {
    throw new AppError('permissionDenied');
  }
  return service.firstSeqOf(log);
}

/** The audited target of a call on a log: the organization, none for master's. */
export const logTarget = ({ realm }: { realm: string }): Record<string, string> =>
  realm === MASTER_REALM ? {} : { organization: realm };

/**
 * How the routes on one variant's log are named and refused, the same for reading it and for
 * its retention: whose log the summary names, the operation id's suffix, the refusals, and who
 * may call.
 */
export function logVariant(variant: RealmVariant) {
  return {
    whose: variant.base === '/api/platform' ? "the platform's (realm master)" : `${variant.name}'s`,
    operation: variant.base.includes('organizations') ? 'OfOrganization' : variant.suffix,
    errors: [...variant.errors, 'permissionDenied'] as ErrorCode[],
    callers:
      variant.base === '/api/platform'
        ? 'Platform administrators.'
        : variant.base.includes('organizations')
          ? "Platform administrators: an organization's whole log, also once the organization is deleted (its records are kept for their retention; `404` only for an id that never had a log)."
          : `The organization's users with the realm role \`${AUDIT_READER_ROLE}\`, from the organization's creation on.`,
  };
}

const filterOf = (query: AuditFilter): AuditFilter => ({
  from: query.from,
  to: query.to,
  actor: query.actor,
  action: query.action,
  outcome: query.outcome,
  workspace: query.workspace,
  credential: query.credential,
});

/** Each export format: its content type and its lines. */
const FORMATS: Record<
  AuditExportFormat,
  { contentType: string; header?: string; line: (record: AuditRecord) => string }
> = {
  jsonl: { contentType: AUDIT_EXPORT_MEDIA_TYPES.jsonl, line: jsonLine },
  csv: {
    contentType: `${AUDIT_EXPORT_MEDIA_TYPES.csv}; charset=utf-8`,
    header: CSV_HEADER,
    line: csvLine,
  },
  ocsf: {
    contentType: AUDIT_EXPORT_MEDIA_TYPES.ocsf,
    line: (record) => `${JSON.stringify(ocsfEventOf(record))}\n`,
  },
};

async function* linesOf(
  records: AsyncIterable<AuditRecord>,
  format: (typeof FORMATS)[AuditExportFormat],
): AsyncGenerator<string> {
  if (format.header !== undefined) yield format.header;
  for await (const record of records) yield format.line(record);
}

/**
 * A JSON Lines export of `span` of `log`, as an export and a download job's file hold it: with
 * the keys and the checkpoints that verify it offline while the log is signed, else the records
 * alone; either way closed by its end line.
 */
export function jsonLinesOf(
  service: AuditLogService,
  log: string,
  records: AsyncIterable<AuditRecord>,
  span: LogSpan,
): AsyncIterable<string> {
  return service.signatures
    ? signedJsonLines(log, records, service.signatures, span.last)
    : unsignedJsonLines(log, records, () => service.now());
}

function logRoutes(variant: RealmVariant): AnyRoute<AuditLogService>[] {
  const base = `${variant.base}/audit-log`;
  const { whose, operation, errors, callers } = logVariant(variant);
  return [
    route({
      method: 'get',
      path: base,
      operationId: `readAuditLog${operation}`,
      summary: `Read ${whose} audit log: filtered, a page at a time (newest first unless \`order=asc\`), with the total`,
      description: `${callers} The read is itself recorded.`,
      tags: ['audit'],
      beyondWorkspaces: true,
      params: variant.params,
      query: auditPageQuery,
      data: auditPage,
      errors: [...errors, 'auditReadsBusy'],
      audit: { action: 'audit_log.read', target: logTarget },
      handler: async (service, { principal, realm, query }) => {
        const since = await allowRead(service, principal, realm);
        // A filter the indexes do not serve scans the log, each statement up to the statement
        // timeout: unbounded, a few readers would hold every connection of the pool.
        return readUnderSlot(
          service.longReads,
          () => service.repo.page(realm, { ...filterOf(query), since }, query),
          principal.realm,
        );
      },
    }),
    route({
      method: 'get',
      path: `${base}/export`,
      operationId: `exportAuditLog${operation}`,
      summary: `Export ${whose} audit log, streamed: JSON Lines (verifiable offline), CSV or OCSF`,
      description:
        'The same filters as the read, but a time range is the stretch of the log from the first to the last record of the range, with the records written between them whatever their time (a chain without gaps). A JSON Lines export of a time range (no other filter) holds every record with its hashes, the signed checkpoints of the range and the public keys, and ends with a signed line saying what it holds (a file without it was cut short): `realmgate audit verify FILE --keys <PUBLIC_URL>/.well-known/audit-keys` checks it. CSV and OCSF are for reading, not verifying. The export is itself recorded.',
      tags: ['audit'],
      beyondWorkspaces: true,
      params: variant.params,
      query: auditExportQuery,
      data: streamedAnswer,
      streams: {
        'application/x-ndjson':
          '`jsonl`: one AuditRecord as JSON per line; `ocsf`: one OCSF event per line (Authentication 3002, API Activity 6003)',
        'text/csv': 'a header row, then one record per row; details as JSON',
      },
      errors: [...errors, 'auditExportPruned', 'auditReadsBusy'],
      audit: { action: 'audit_log.export', target: logTarget },
      handler: async (service, { principal, realm, query }) => {
        const since = await allowRead(service, principal, realm);
        const filter = { ...filterOf(query), since };
        const format = FORMATS[query.format];
        const lines = await underSlot(
          service.longReads,
          async () => {
            const span = await service.repo.span(realm, filter);
            const records = service.repo.records(realm, filter, span);
            return query.format === 'jsonl'
              ? jsonLinesOf(service, realm, records, span)
              : linesOf(records, format);
          },
          principal.realm,
        );
        return new StreamedAnswer(
          format.contentType,
          `audit-${realm}.${query.format === 'csv' ? 'csv' : 'jsonl'}`,
          lines,
          service.stallMs,
        );
      },
    }),
  ];
}

/** Master's log, an organization's by administrators, and an organization's by its own users. */
export const auditLogRoutes = [...administeredRealms, callerRealms[1]!].flatMap(logRoutes);
