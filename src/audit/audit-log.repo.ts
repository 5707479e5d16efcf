import type { Knex } from 'knex';
import { runSpared } from '../db/database.ts';
import { AppError } from '../envelope/errors.ts';
import type { AuditRecord } from './audit-chain.ts';
import { CHECKPOINTS_TABLE } from './audit-checkpointer.ts';
import type { AuditFilter, AuditOrder } from './audit-log.schemas.ts';
import { AUDIT_TABLE, HEADS_TABLE, recordOf, type AuditRow } from './audit-rows.ts';

/** Rows read at once by an export: its memory, whatever the log's size. */
const EXPORT_CHUNK = 1000;

export interface AuditLogRepo {
  /**
   * One page of `log` in `order` of sequence numbers, past `after` in that order (keyset: a
   * record written meanwhile never shifts a page), and how many records match in all.
   */
  page(
    log: string,
    filter: LogFilter,
    keyset: { order: AuditOrder; after?: number; limit: number },
  ): Promise<{ records: AuditRecord[]; total: number; next: number | null }>;
  /**
   * The stretch of `log` an export of a time range covers (see `exportSpan`), as of the call;
   * `upTo`: as of that sequence number instead (a download job's, fixed when it ran).
   */
  span(log: string, range: TimeRange, upTo?: number): Promise<LogSpan>;
  /**
   * Every record of `span` matching `filter`'s other filters (its time range made the span), in
   * sequence order: read in chunks by sequence number (keyset), so memory stays bounded
   * whatever the log's size. Fails (`auditExportPruned`) once retention removed records of the
   * span it had yet to read: what it gave would have a gap that reads as records deleted.
   */
  records(log: string, filter: LogFilter, span: LogSpan): AsyncGenerator<AuditRecord>;
  /**
   * Whether the database keeps a log of this id: a deleted organization's stays (for its
   * retention) until an organization has the id again, and after.
   */
  kept(log: string): Promise<boolean>;
}

/** An export's time range. */
export type TimeRange = Pick<LogFilter, 'from' | 'to' | 'since'>;

/** Sequence numbers `first` through `last` of a log; none when `last` < `first`. */
export interface LogSpan {
  first: number;
  last: number;
}

/** Where each organization's log begins for its own readers (audit-incarnations.ts). */
export const INCARNATIONS = 'audit_log_incarnations';

/** The first record `org`'s own readers may read: its organization's first (1: all). */
export async function firstSeqOf(db: Knex, org: string): Promise<number> {
  const [row] = await db(INCARNATIONS)
    .where({ org })
    .max<{ first: unknown }[]>({ first: 'first_seq' });
  return Number(row?.first ?? 1);
}

/**
 * The reader's filters, and `since`: the first record the caller may read (an organization's
 * readers, from their organization's creation on); never a client's.
 */
export type LogFilter = AuditFilter & { since?: number };

/** `%` and `_` are a LIKE pattern's: matched as themselves. */
const literal = (value: string) => value.replace(/[\\%_]/g, (c) => `\\${c}`);

function filtered(db: Knex, log: string, filter: LogFilter): Knex.QueryBuilder {
  const query = db(AUDIT_TABLE).where({ org: log });
  if (filter.since !== undefined) void query.where('seq', '>=', filter.since);
  if (filter.from !== undefined) void query.where('at', '>=', new Date(filter.from));
  if (filter.to !== undefined) void query.where('at', '<', new Date(filter.to));
  if (filter.actor !== undefined) {
    const actor = filter.actor;
    void query.where((q) => void q.where('actor_name', actor).orWhere('actor_id', actor));
  }
  if (filter.action !== undefined) {
    if (filter.action.endsWith('.*')) {
      void query.whereLike('action', `${literal(filter.action.slice(0, -1))}%`);
    } else void query.where('action', filter.action);
  }
  if (filter.outcome !== undefined) void query.where('outcome', filter.outcome);
  if (filter.workspace !== undefined) void query.where('workspace', filter.workspace);
  if (filter.credential !== undefined) void query.where('credential', filter.credential);
  return query;
}

/**
 * What an export of a time range covers: the log from the first to the last record of the
 * range by sequence number, with the records written between them whatever their own time.
 * Records are numbered as they are written, and their times are those of the events: two
 * replicas' batches interleave in time, a Keycloak event is taken after newer records. A time
 * range taken by time alone would leave gaps in the chain, and the export would not verify.
 * It ends no sooner than the last checkpoint of a record of the range: a record cut off the
 * end of the range still has its checkpoint in the export, where the verifier finds it missing.
 * Reads what the range holds (the index on the time), as the export does anyway.
 */
export async function exportSpan(
  db: Knex,
  log: string,
  range: TimeRange,
  upTo?: number,
): Promise<LogSpan> {
  const query = filtered(db, log, { from: range.from, to: range.to, since: range.since });
  if (upTo !== undefined) void query.where('seq', '<=', upTo);
  const [ends] = await (query.min({ first: 'seq' }).max({ last: 'seq' }) as Promise<
    { first: unknown; last: unknown }[]
  >);
  if (ends?.first === null || ends?.first === undefined) return { first: 1, last: 0 };
  const first = Number(ends.first);
  const signed = db(CHECKPOINTS_TABLE).where({ org: log }).where('seq', '>=', first);
  if (range.from !== undefined) void signed.where('record_at', '>=', new Date(range.from));
  if (range.to !== undefined) void signed.where('record_at', '<', new Date(range.to));
  if (upTo !== undefined) void signed.where('seq', '<=', upTo);
  const [last] = await (signed.max({ seq: 'seq' }) as Promise<{ seq: unknown }[]>);
  return { first, last: Math.max(Number(ends.last), Number(last?.seq ?? 0)) };
}

/**
 * The log's reader on `db`. Once `stopping` aborts (shutdown), an export's chunk in progress is
 * cancelled: a read its client no longer waits for must not hold the database's close.
 */
export function createAuditLogRepo(db: Knex, stopping?: AbortSignal): AuditLogRepo {
  return {
    async page(log, filter, { order, after, limit }) {
      // One snapshot for both, so the total counts the records the page shows: read apart, a
      // batch committed between the two made a page of none with a total of one.
      const [rows, counted] = await db.transaction(
        async (trx) => {
          const query = filtered(trx, log, filter);
          if (after !== undefined) void query.where('seq', order === 'asc' ? '>' : '<', after);
          const page = await (query.orderBy('seq', order).limit(limit + 1) as Promise<AuditRow[]>);
          const count = await (filtered(trx, log, filter).count({ count: '*' }) as Promise<
            { count: string | number }[]
          >);
          return [page, count] as const;
        },
        { isolationLevel: 'repeatable read', readOnly: true },
      );
      const records = rows.slice(0, limit).map(recordOf);
      return {
        records,
        total: Number(counted[0]?.count ?? 0),
        next: rows.length > limit ? records.at(-1)!.seq : null,
      };
    },
    span: (log, range, upTo) => exportSpan(db, log, range, upTo),
    async kept(log) {
      return (await db(HEADS_TABLE).where({ org: log }).first('org')) !== undefined;
    },
    async *records(log, filter, { first, last }) {
      const others = { ...filter, from: undefined, to: undefined };
      let after = first - 1;
      for (;;) {
        // A chunk and where the log begins, read in one snapshot: retention removes a log's
        // oldest records, so none past `after` is missing while it begins at or before the next.
        // An export's chunk may scan far for a sparse filter: not under the statement timeout.
        const { rows, begins } = await runSpared(
          db,
          async (trx) => {
            const chunk = (await filtered(trx, log, others)
              .where('seq', '>', after)
              .where('seq', '<=', last)
              .orderBy('seq')
              .limit(EXPORT_CHUNK)) as AuditRow[];
            const [oldest] = await trx(AUDIT_TABLE)
              .where({ org: log })
              .min<{ first: unknown }[]>({ first: 'seq' });
            return { rows: chunk, begins: oldest?.first ?? null };
          },
          { isolationLevel: 'repeatable read', readOnly: true },
          stopping,
        );
        if (after < last && (begins === null || Number(begins) > after + 1)) {
          throw new AppError('auditExportPruned');
        }
        for (const row of rows) yield recordOf(row);
        if (rows.length < EXPORT_CHUNK) return;
        after = Number(rows.at(-1)!.seq);
      }
    },
  };
}
