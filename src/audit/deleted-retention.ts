import type { Knex } from 'knex';
import { INCARNATIONS } from './audit-log.repo.ts';

/**
 * The records of one organization deleted before under a log's id (audit-incarnations.ts):
 * `from` to `until` (exclusive) in the log, kept for the days it chose (undefined: the
 * platform's default), held in the next organization's incarnation row (`prior_days`).
 */
export interface DeletedStretch {
  from: number;
  until: number;
  days: number | undefined;
}

interface IncarnationRow {
  first_seq: string | number;
  prior_days: number | null;
}

/**
 * The retention of the organizations deleted before under an id that names another now: a
 * platform administrator keeps an auditor's answer about them (a longer hold, or less once
 * there is no reason to keep them), which the new organization's choice cannot change.
 */
export interface DeletedRetention {
  /** The deleted organizations' stretches of `org`'s log, oldest first; none empty. */
  of(org: string): Promise<DeletedStretch[]>;
  /** Sets the days of the stretch that begins at `from`; false: no such stretch. */
  set(org: string, from: number, days: number): Promise<boolean>;
}

/** Each stretch with the incarnation row that holds its days, empty ones left out. */
async function stretchesOf(db: Knex, org: string) {
  const rows = await db(INCARNATIONS)
    .where({ org })
    .orderBy('first_seq')
    .select<IncarnationRow[]>('first_seq', 'prior_days');
  return rows
    .map((row, i) => ({
      from: i === 0 ? 1 : Number(rows[i - 1]!.first_seq),
      until: Number(row.first_seq),
      days: row.prior_days ?? undefined,
      held: Number(row.first_seq),
    }))
    .filter((stretch) => stretch.from < stretch.until);
}

export function createDeletedRetention(db: Knex): DeletedRetention {
  return {
    async of(org) {
      return (await stretchesOf(db, org)).map(({ from, until, days }) => ({ from, until, days }));
    },
    async set(org, from, days) {
      const stretch = (await stretchesOf(db, org)).find((s) => s.from === from);
      if (stretch === undefined) return false;
      await db(INCARNATIONS).where({ org, first_seq: stretch.held }).update({ prior_days: days });
      return true;
    },
  };
}
