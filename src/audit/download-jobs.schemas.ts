import { z } from 'zod';
import { AppError } from '../envelope/errors.ts';
import { filterText } from './audit-log.schemas.ts';

/**
 * The reference platform's download jobs (docs/audit.md, "Download jobs"): its states, its
 * request and list shapes, as its clients and web page read them.
 */
export const DOWNLOAD_STATES = [
  'NotExecuted',
  'Executing',
  'Completion',
  'Failed',
  'NoData',
] as const;

export type DownloadState = (typeof DOWNLOAD_STATES)[number];

/** The longest range one job may cover: a year, leap day included. */
export const MAX_RANGE_DAYS = 366;

// The reference's `YYYY-MM-DD HH:MM:SS` (read as UTC, the gateway's zone), or ISO 8601 with a
// zone; whole seconds either way, as the reference's web page sends them.
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(Z|[+-]\d{2}:\d{2})?$/;

/** Epoch milliseconds of a range bound, or undefined for a text that is no such time. */
export function rangeBoundOf(text: string): number | undefined {
  const match = TIMESTAMP.exec(text);
  if (!match) return undefined;
  const [, year, month, day, hour, minute, second, zone = 'Z'] = match;
  const ms = Date.parse(`${year}-${month}-${day}T${hour}:${minute}:${second}${zone}`);
  // `Date` rolls 2026-02-30 over to March 2: a calendar mistake is refused, not moved.
  const calendar = new Date(Date.UTC(Number(year), Number(month) - 1, Number(day)));
  const sameDay =
    calendar.getUTCFullYear() === Number(year) &&
    calendar.getUTCMonth() === Number(month) - 1 &&
    calendar.getUTCDate() === Number(day);
  if (Number.isNaN(ms) || !sameDay || Number(hour) > 23 || Number(minute) > 59) return undefined;
  if (Number(second) > 59) return undefined;
  return ms;
}

const bound = z.string().regex(TIMESTAMP, {
  message: 'expected "YYYY-MM-DD HH:MM:SS" (UTC) or an ISO 8601 date-time with zone',
});

/**
 * `POST .../auditlog/download`: the range, both ends included to the second. Its schema reads
 * the form; `rangeOf` the calendar and the order.
 */
export const downloadRequest = z
  .strictObject({
    ts_from: bound.meta({ example: '2026-11-01 00:00:00' }),
    ts_to: bound.meta({ example: '2026-11-30 23:59:59' }),
  })
  .meta({ id: 'AuditDownloadRequest' });

/** The range a request asks for, epoch ms; a refusal naming what is wrong otherwise. */
export function rangeOf(body: { ts_from: string; ts_to: string }): {
  fromMs: number;
  toMs: number;
} {
  const fromMs = rangeBoundOf(body.ts_from);
  const toMs = rangeBoundOf(body.ts_to);
  const problem =
    fromMs === undefined
      ? 'ts_from: no such date or time'
      : toMs === undefined
        ? 'ts_to: no such date or time'
        : toMs < fromMs
          ? 'ts_to: before ts_from'
          : toMs - fromMs > MAX_RANGE_DAYS * 86_400_000
            ? `ts_to: more than ${MAX_RANGE_DAYS} days after ts_from`
            : undefined;
  if (problem !== undefined) throw new AppError('badRequestBody', { message: problem, data: null });
  return { fromMs: fromMs!, toMs: toMs! };
}

export const downloadCreated = z
  .object({ download_id: z.string() })
  .meta({ id: 'AuditDownloadCreated' });

export const downloadListQuery = z.strictObject({
  download_id: filterText(64).optional().meta({ description: 'that job only' }),
});

export const downloadJob = z
  .object({
    download_id: z.string(),
    status: z.enum(DOWNLOAD_STATES),
    conditions: z.string().meta({
      description:
        'the request\'s `{"ts_from","ts_to"}` as a JSON text, as the reference platform answers it (its web page parses it)',
    }),
    count_export: z.number().int().nullable(),
    message: z.string().nullable(),
    create_timestamp: z.string().meta({ description: 'ISO 8601 UTC, milliseconds' }),
    create_user_id: z.string().nullable(),
    create_user_name: z.string().nullable(),
    last_update_timestamp: z.string().meta({ description: 'ISO 8601 UTC, milliseconds' }),
  })
  .meta({ id: 'AuditDownloadJob' });

export const downloadList = z.array(downloadJob).meta({ id: 'AuditDownloadList' });

export type DownloadJob = z.output<typeof downloadJob>;
