import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { toIsoTimestamp } from '../db/column-values.ts';
import type { Clock } from '../time/clock.ts';
import { every, type Periodic } from '../time/every.ts';
import type { Checkpoint, CheckpointSigner } from './audit-checkpoints.ts';
import { AUDIT_TABLE, HEADS_TABLE } from './audit-rows.ts';

export const CHECKPOINTS_TABLE = 'audit_checkpoints';

/** When a log is checkpointed: after `records` new records, or once its oldest unsigned one is `ms` old. */
export interface CheckpointPeriod {
  records: number;
  ms: number;
}

export interface Checkpointer {
  /** Checkpoints every log that is due, until `signal` aborts (shutdown); how many it signed. */
  checkpointDue(signal?: AbortSignal): Promise<number>;
  /** Checkpoints its head now if it moved since its last checkpoint. */
  checkpoint(org: string): Promise<Checkpoint | undefined>;
}

interface Unsigned {
  org: string;
  seq: number;
  /** The last checkpoint's seq, 0 when none. */
  signed: number;
  /** The time of the first record after it. */
  oldest: Date | null;
}

/** Each log whose head is past its last checkpoint (`org` given: that one only). */
async function unsignedLogs(db: Knex, org?: string): Promise<Unsigned[]> {
  type Row = { org: string; seq: unknown; signed: unknown };
  // Each log's last checkpoint read through the primary key (org, seq), one lookup a log: a
  // `group by` over every checkpoint kept would scan the whole table every few seconds.
  const lastSigned = db(CHECKPOINTS_TABLE)
    .max('seq')
    .where('org', db.ref(`${HEADS_TABLE}.org`))
    .as('signed');
  const query = db(HEADS_TABLE).select('org', 'seq', lastSigned);
  const heads = (await (org === undefined ? query : query.where({ org }))) as Row[];
  const unsigned: Unsigned[] = [];
  for (const head of heads) {
    const seq = Number(head.seq);
    const signed = head.signed === null ? 0 : Number(head.signed);
    if (seq <= signed) continue;
    const first = await db(AUDIT_TABLE)
      .where({ org: head.org, seq: signed + 1 })
      .first<{ at: unknown } | undefined>('at');
    const oldest = first === undefined ? null : new Date(toIsoTimestamp(first.at));
    unsigned.push({ org: head.org, seq, signed, oldest });
  }
  return unsigned;
}

/**
 * Signs checkpoints of the audit logs (docs/audit.md). Any replica may run it at any time:
 * signing a log locks its head row, the one the writers lock to append (audit-writer.ts), and
 * looks again whether the log is still due; a replica that comes second finds the checkpoint
 * just made and signs nothing. So there is one checkpoint per log and period, whichever replica
 * made it, and it names the head as it was, with no record half written.
 */
export function createCheckpointer(deps: {
  db: Knex;
  /** The key (opened on first use: it writes its public key to the database). */
  signer: () => Promise<CheckpointSigner>;
  clock: Clock;
  period: CheckpointPeriod;
}): Checkpointer {
  const { db, signer, clock, period } = deps;
  const isDue = (log: Unsigned) =>
    log.seq - log.signed >= period.records ||
    // No record after the last checkpoint to date it (removed by hand): sign what is there.
    log.oldest === null ||
    clock.now() - log.oldest.getTime() >= period.ms;

  async function sign(org: string, due: (log: Unsigned) => boolean) {
    // Opened outside the transaction: it writes its public key with a connection of its own.
    const key = await signer();
    return db.transaction(async (trx) => {
      await trx(HEADS_TABLE).where({ org }).forUpdate().first();
      const [log] = await unsignedLogs(trx, org);
      if (log === undefined || !due(log)) return undefined;
      const head = await trx(AUDIT_TABLE)
        .where({ org, seq: log.seq })
        .first<{ hash: string; at: unknown } | undefined>('hash', 'at');
      // The head's record removed (by hand: retention keeps the head): nothing to vouch for.
      if (head === undefined) return undefined;
      const checkpoint = await key.sign({
        org,
        seq: log.seq,
        hash: head.hash,
        recordAt: toIsoTimestamp(head.at),
        at: new Date(clock.now()).toISOString(),
      });
      await trx(CHECKPOINTS_TABLE).insert({
        org,
        seq: checkpoint.seq,
        hash: checkpoint.hash,
        record_at: new Date(checkpoint.recordAt),
        at: new Date(checkpoint.at),
        kid: checkpoint.kid,
        jws: checkpoint.jws,
      });
      return checkpoint;
    });
  }

  return {
    async checkpointDue(signal) {
      let signed = 0;
      for (const log of await unsignedLogs(db)) {
        // Each log's checkpoint is a transaction of its own: those not begun wait for a replica.
        if (signal?.aborted) break;
        if (isDue(log) && (await sign(log.org, isDue))) signed++;
      }
      return signed;
    },
    checkpoint: (org) => sign(org, () => true),
  };
}

/** Runs `checkpointDue` every `intervalMs` until stopped; a failure is logged and tried again. */
export function scheduleCheckpoints(
  checkpointer: Checkpointer,
  intervalMs: number,
  logger: Logger,
): Periodic {
  return every(intervalMs, (signal) => checkpointer.checkpointDue(signal), {
    onError: (err) => logger.warn({ err }, 'audit log: checkpoint failed; next time'),
  });
}

/** A checkpoint as a row of `audit_checkpoints` holds it. */
export function checkpointOf(row: Record<string, unknown>): Checkpoint {
  return {
    org: String(row.org),
    seq: Number(row.seq),
    hash: String(row.hash),
    recordAt: toIsoTimestamp(row.record_at),
    at: toIsoTimestamp(row.at),
    kid: String(row.kid),
    jws: String(row.jws),
  };
}
