import type { Knex } from 'knex';
import type { AuditRecord } from './audit-chain.ts';
import type { AuditFilter, AuditOrder } from './audit-log.schemas.ts';
import { AUDIT_TABLE, recordOf, type AuditRow } from './audit-rows.ts';

/** Rows read at once by an export: its memory, whatever the log's size. */
const EXPORT_CHUNK = 1000;

export interface AuditLogRepo {
  /**
   * One page of `log` in `order` of sequence numbers, past `after` in that order (keyset: a
   * record written meanwhile never shifts a page), and how many records match in all.
   */
  page(
    log: string,
    filter: AuditFilter,
    keyset: { order: AuditOrder; after?: number; limit: number },
  ): Promise<{ records: AuditRecord[]; total: number; next: number | null }>;
  /**
   * Every record of `log` matching `filter`, in sequence order, as of the call: read in chunks
   * by sequence number (keyset), so memory stays bounded whatever the log's size. `upTo`: as of
   * that sequence number instead (a download job's, fixed when it ran).
   */
  records(log: string, filter: AuditFilter, upTo?: number): AsyncGenerator<AuditRecord>;
}

/** `%` and `_` are a LIKE pattern's: matched as themselves. */
const literal = (value: string) => value.replace(/[\\%_]/g, (c) => `\\${c}`);

function filtered(db: Knex, log: string, filter: AuditFilter): Knex.QueryBuilder {
  const query = db(AUDIT_TABLE).where({ org: log });
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

export function createAuditLogRepo(db: Knex): AuditLogRepo {
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
    async *records(log, filter, upTo) {
      const last =
        upTo ??
        (await db(AUDIT_TABLE).where({ org: log }).max<{ max: unknown }[]>({ max: 'seq' }))[0]?.max;
      const end = Number(last ?? 0);
      let after = 0;
      for (;;) {
        const rows = (await filtered(db, log, filter)
          .where('seq', '>', after)
          .where('seq', '<=', end)
          .orderBy('seq')
          .limit(EXPORT_CHUNK)) as AuditRow[];
        for (const row of rows) yield recordOf(row);
        if (rows.length < EXPORT_CHUNK) return;
        after = Number(rows.at(-1)!.seq);
      }
    },
  };
}
