import type { Knex } from 'knex';
import { GENESIS_HASH } from './audit-chain.ts';
import { firstSeqOf, INCARNATIONS } from './audit-log.repo.ts';
import { RETENTION_TABLE } from './audit-retention.ts';
import { HEADS_TABLE } from './audit-rows.ts';
import { JOBS } from './download-jobs.ts';

/**
 * An organization's log is kept by its id, and an id may name a new organization once the old
 * one is deleted (docs/audit.md, "An organization id used again"). The log goes on as one
 * chain, so that it and its checkpoints still verify; what the new organization's own readers
 * reach begins with its creation. The deleted organization's records stay, for the retention,
 * readable by platform administrators only.
 */
export interface AuditIncarnations {
  /**
   * `org` is being created (or created again): its readers' log begins after the records the
   * log holds now. The download jobs its previous organization's readers made go (platform
   * administrators' stay); the retention it chose
   * stays with its records (`prior_days`), and the new organization starts at the default.
   * Within `trx` when given: the transaction that makes the organization's record.
   */
  begin(org: string, at: Date, trx?: Knex): Promise<void>;
  /** The first record `org`'s own readers may read (1: the whole log). */
  firstSeqOf(org: string): Promise<number>;
}

export function createAuditIncarnations(db: Knex): AuditIncarnations {
  return {
    async begin(org, at, within = db) {
      await within.transaction(async (trx) => {
        // The head's lock, as the writers take it: no batch is half written at the boundary.
        await trx(HEADS_TABLE)
          .insert({ org, seq: 0, hash: GENESIS_HASH })
          .onConflict('org')
          .ignore();
        const head = (await trx(HEADS_TABLE).where({ org }).forUpdate().first()) as {
          seq: string | number;
        };
        // The days the previous organization chose keep its records (audit-retention.ts): the
        // new organization's choice is for its own.
        const chosen = await trx(RETENTION_TABLE)
          .where({ org })
          .first<{ days: number } | undefined>('days');
        await trx(INCARNATIONS)
          .insert({
            org,
            first_seq: Number(head.seq) + 1,
            began_at: at,
            prior_days: chosen?.days ?? null,
          })
          .onConflict(['org', 'first_seq'])
          .ignore();
        // Its readers' jobs only: platform administrators' cover the whole log, and stay.
        await trx(JOBS).where({ org, whole_log: false }).del();
        await trx(RETENTION_TABLE).where({ org }).del();
      });
    },
    firstSeqOf: (org) => firstSeqOf(db, org),
  };
}
