import { z } from 'zod';
import { oneLine, queryCount } from '../platform/user-input.ts';
import {
  AUDIT_EXPORT_FORMATS,
  AUDIT_ORDERS,
  AUDIT_OUTCOMES,
  AUDIT_PAGE_MAX,
  CREDENTIAL_KINDS,
} from './audit-filter-values.ts';

export type { AuditExportFormat, AuditOrder } from './audit-filter-values.ts';

/** A record as the API answers it: every field the chain covers (see audit-chain.ts). */
export const auditRecord = z
  .object({
    org: z.string(),
    seq: z.number().int(),
    at: z.string().meta({ description: 'ISO 8601 UTC, milliseconds' }),
    action: z.string().meta({
      description:
        '`api.request`, `auth.request`, `token.grant`, `audit_log.read`, or a change (`user.delete`...)',
    }),
    outcome: z.enum(['success', 'failure']),
    actorRealm: z.string().nullable(),
    actorId: z.string().nullable(),
    actorName: z.string().nullable(),
    credential: z.string().nullable().meta({
      description: '`basic`, `bearer`, `dpop`, `none`, `other`',
    }),
    clientId: z.string().nullable(),
    jobCredential: z.string().nullable(),
    jtiSha256: z.string().nullable(),
    jkt: z.string().nullable(),
    method: z.string().nullable(),
    route: z.string().nullable(),
    path: z.string().nullable(),
    workspace: z.string().nullable(),
    status: z.number().int().nullable(),
    result: z.string().nullable(),
    reason: z.string().nullable(),
    address: z.string().nullable(),
    requestId: z.string().nullable(),
    details: z.record(z.string(), z.union([z.string(), z.array(z.string())])),
    prevHash: z.string(),
    hash: z.string(),
  })
  .meta({ id: 'AuditRecord' });

const timestamp = z.iso.datetime({ offset: true });

/**
 * A text filter: one line (no control character, no lone surrogate). PostgreSQL text holds no
 * NUL, so a filter with one fails the query itself: refused here as the bad request it is.
 */
export const filterText = (max: number) => oneLine(max);

/** The reader's filters, the same for a page and an export. */
export const auditFilterShape = {
  from: timestamp.optional().meta({ description: 'records at or after this time' }),
  to: timestamp.optional().meta({ description: 'records before this time' }),
  actor: filterText(255).optional().meta({
    description: "the caller's user name or id (a user name tried, for a refused login)",
  }),
  action: filterText(100).optional().meta({
    description: 'an action (`api.request`), or every action of a kind (`user.*`)',
  }),
  outcome: z.enum(AUDIT_OUTCOMES).optional(),
  workspace: filterText(255).optional(),
  credential: z.enum(CREDENTIAL_KINDS).optional(),
};

/**
 * A range whose `to` is before its `from` holds nothing: a mistake (the bounds swapped), refused
 * as one, as a download job's is, not answered with an empty page or export. The same instant
 * at both ends (in any zones) is an empty range.
 */
const inOrder = <T extends { from?: string; to?: string }>(query: T) =>
  // Not `>=`: a bound that failed its own check (NaN) is refused for that alone.
  query.from === undefined ||
  query.to === undefined ||
  !(Date.parse(query.to) < Date.parse(query.from));
const REVERSED = { message: 'before from', path: ['to'] };

export const auditPageQuery = z
  .strictObject({
    ...auditFilterShape,
    order: z.enum(AUDIT_ORDERS).default('desc').meta({
      description: '`desc`: newest first (the default); `asc`: oldest first, in chain order',
    }),
    after: queryCount(Number.MAX_SAFE_INTEGER).optional().meta({
      description:
        'the `next` of the previous page, with the same `order`: the records past this sequence number in that order (older for `desc`, newer for `asc`)',
    }),
    limit: queryCount(AUDIT_PAGE_MAX).pipe(z.number().min(1)).default(100),
  })
  .refine(inOrder, REVERSED);

export const auditExportQuery = z
  .strictObject({
    ...auditFilterShape,
    format: z.enum(AUDIT_EXPORT_FORMATS).default('jsonl'),
  })
  .refine(inOrder, REVERSED);

export const auditPage = z
  .object({
    records: z.array(auditRecord),
    total: z.number().int().meta({ description: 'records matching the filters, every page' }),
    next: z.number().int().nullable().meta({
      description: 'pass as `after` for the next page; null on the last',
    }),
  })
  .meta({ id: 'AuditLogPage' });

export type AuditFilter = Partial<{
  from: string;
  to: string;
  actor: string;
  action: string;
  outcome: 'success' | 'failure';
  workspace: string;
  credential: string;
}>;
