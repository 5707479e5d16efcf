import { z } from 'zod';
import { AppError } from '../envelope/errors.ts';
import { routeFor, StreamedAnswer, streamedAnswer, type AnyRoute } from '../http/route-table.ts';
import { administeredRealms, callerRealms, type RealmVariant } from '../platform/path-ids.ts';
import { AUDIT_READER_ROLE } from '../tenancy/identifiers.ts';
import {
  allowRead,
  jsonLinesOf,
  logTarget,
  logVariant,
  type AuditLogService,
} from './audit-log.router.ts';
import type { LogSpan } from './audit-log.repo.ts';
import type { DownloadJobs, FinishedJob } from './download-jobs.ts';
import {
  downloadCreated,
  downloadList,
  downloadListQuery,
  downloadRequest,
  rangeBoundOf,
  rangeOf,
  MAX_RANGE_DAYS,
} from './download-jobs.schemas.ts';
import { zipOfOne } from './download-zip.ts';
import { underSlot } from './long-reads.ts';

/** What the download routes are served with: the log's readers' service, and the jobs. */
export interface AuditDownloadService extends AuditLogService {
  jobs: DownloadJobs;
  /** Runs waiting jobs now, on this replica. */
  kick(): void;
}

const route = routeFor<AuditDownloadService>({ metricsClass: 'list' });

const organization = callerRealms[1]!;

/** `YYYYMMDD` of a range bound, for the file's name. */
const dayOf = (text: string) =>
  new Date(rangeBoundOf(text)!).toISOString().slice(0, 10).replaceAll('-', '');

const sentRange = (sent: unknown): Record<string, string> => {
  const body = (typeof sent === 'object' && sent !== null ? sent : {}) as Record<string, unknown>;
  const range: Record<string, string> = {};
  for (const key of ['ts_from', 'ts_to']) {
    if (typeof body[key] === 'string') range[key] = body[key];
  }
  return range;
};

/**
 * Who a variant's jobs are for: at the organization's own path (the reference's), its readers,
 * whose jobs hold its own records; at the administrators' paths, platform administrators, whose
 * jobs hold the whole log, a deleted organization's included (as their read and export do).
 */
function jobVariant(variant: RealmVariant) {
  const own = variant === organization;
  const { operation, callers } = logVariant(variant);
  return {
    whole: !own,
    // The reference's clients know the organization's operations by these names.
    operation: own ? '' : operation,
    who: own
      ? `Users of the organization with its realm role \`${AUDIT_READER_ROLE}\` (the reference platform's rule).`
      : `${callers} A job holds the whole log, as the read and the export do; it is listed apart from the organization's readers' jobs, and stays when an organization is created again under the id.`,
  };
}

/**
 * The reference platform's audit log downloads, at its paths and with its states and shapes, so
 * its clients and web page keep working (docs/audit.md, "Download jobs"); the same for platform
 * administrators at theirs.
 */
function downloadRoutes(variant: RealmVariant): AnyRoute<AuditDownloadService>[] {
  const base = `${variant.base}/auditlog/download`;
  const { whole, operation, who } = jobVariant(variant);
  const errors = [...variant.errors, 'permissionDenied'] as const;
  return [
    route({
      method: 'post',
      path: base,
      operationId: `requestAuditLogDownload${operation}`,
      summary: "Start an audit log download of a time range (the reference platform's job)",
      description: `${who} \`ts_from\` and \`ts_to\` are both included, to the second; "YYYY-MM-DD HH:MM:SS" is read as UTC. At most ${MAX_RANGE_DAYS} days; an organization keeps at most 100 jobs, each for 7 days. The job runs once, on one replica; its zip is downloadable from any. Recorded as \`audit_log.download_request\`.`,
      tags: ['audit'],
      beyondWorkspaces: true,
      params: variant.params,
      body: downloadRequest,
      data: downloadCreated,
      errors: [...errors, 'auditDownloadLimit'],
      audit: {
        action: 'audit_log.download_request',
        target: ({ realm, sent }) => ({ ...logTarget({ realm }), ...sentRange(sent) }),
      },
      handler: async (service, { principal, realm, body }) => {
        await allowRead(service, principal, realm);
        const range = rangeOf(body);
        const id = await service.jobs.create(
          { org: realm, whole },
          { conditions: body, ...range },
          { id: principal.userId, name: principal.username },
        );
        service.kick();
        return { download_id: id };
      },
    }),
    route({
      method: 'get',
      path: base,
      operationId: `listAuditLogDownloads${operation}`,
      summary:
        'List the audit log downloads, newest first: NotExecuted, Executing, Completion, Failed, NoData',
      description: who,
      tags: ['audit'],
      beyondWorkspaces: true,
      params: variant.params,
      query: downloadListQuery,
      data: downloadList,
      errors: [...errors],
      handler: async (service, { principal, realm, query }) => {
        await allowRead(service, principal, realm);
        return service.jobs.list({ org: realm, whole }, query.download_id);
      },
    }),
    route({
      method: 'post',
      path: `${base}/{download_id}`,
      operationId: `downloadAuditLog${operation}`,
      summary: 'Download a finished audit log download: a zip of one JSON Lines file',
      description: `${who} A form post as the reference's web page sends it: without an Authorization header, the form field \`authorization\` (\`Bearer <token>\` or \`Basic <credentials>\`, application/x-www-form-urlencoded) is read instead. The file holds the range's records as they were when the job ran, oldest first, as \`/audit-log/export\` writes them (with the keys and checkpoints that verify them): \`realmgate audit verify\` checks it once unzipped. Recorded as \`audit_log.download\`.`,
      tags: ['audit'],
      beyondWorkspaces: true,
      formCredentials: true,
      params: {
        ...variant.params,
        download_id: { schema: z.string().min(1).max(64), invalid: 'auditDownloadNotFound' },
      },
      data: streamedAnswer,
      streams: { 'application/zip': 'one entry, `exastro_audit_<from>-<to>.log`: JSON Lines' },
      errors: [
        ...errors,
        'auditDownloadNotFound',
        'auditDownloadNotReady',
        'auditExportPruned',
        'auditReadsBusy',
      ],
      audit: {
        action: 'audit_log.download',
        target: ({ realm, params }) => ({
          ...logTarget({ realm }),
          download_id: params.download_id!,
        }),
      },
      handler: async (service, { principal, realm, params }) => {
        const since = await allowRead(service, principal, realm);
        const job = await service.jobs.finished({ org: realm, whole }, params.download_id!);
        // The reference's names: its clients may look for them.
        const name = `exastro_audit_${dayOf(job.conditions.ts_from)}-${dayOf(job.conditions.ts_to)}.log`;
        // The slot is held by the zip as sent: a client gone ends it, not the lines behind it.
        const zip = await underSlot(
          service.longReads,
          async () => {
            const span = await service.repo.span(
              realm,
              { from: job.fromIso, to: job.toIso, since },
              job.lastSeq,
            );
            if (!holdsAll(span, job)) throw new AppError('auditExportPruned');
            const lines = jsonLinesOf(
              service,
              realm,
              service.repo.records(realm, { since }, span),
              span,
            );
            return zipOfOne(name, lines, new Date(job.toIso));
          },
          principal.realm,
        );
        return new StreamedAnswer('application/zip', 'audit-log.zip', zip, service.stallMs);
      },
    }),
  ];
}

/**
 * Whether the log still holds the job's first record, so all it covers: retention removes a
 * log's oldest records first. Checked before the zip begins: its first bytes (the entry's
 * header) commit the 200, and a zip of the records left would read as records deleted.
 */
function holdsAll(span: LogSpan, job: FinishedJob): boolean {
  if (job.firstSeq === null) return true;
  return span.first === job.firstSeq && span.last >= span.first;
}

/** The organization's readers' (the reference's paths), master's and an organization's by administrators. */
export const auditDownloadRoutes = [organization, ...administeredRealms].flatMap(downloadRoutes);
