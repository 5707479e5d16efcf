import type { Knex } from 'knex';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pruneAuditLog } from '../../../src/audit/audit-retention.ts';
import { isDatabaseUnavailable } from '../../../src/db/database-failures.ts';
import { apiEvent, quietWriter } from '../../helpers/audit-records.ts';
import { openEmbeddedDatabase } from '../../helpers/embedded-db.ts';

const DAY = 24 * 3600 * 1000;
const NOW = Date.UTC(2026, 11, 1);
const clock = { now: () => NOW };
const bounds = { defaultDays: 365, minDays: 1, maxDays: 3650 };

/**
 * Retention runs that fail (embedded database): a trigger refuses the deletes of a log, either
 * as PostgreSQL does when it cannot serve (SQLSTATE 57P03) or for a reason of that log's own.
 */
describe('audit retention: failures (embedded database)', () => {
  let db: Knex;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ db, close } = await openEmbeddedDatabase('audit-retention-failures'));
  }, 120_000);
  afterAll(() => close());
  afterEach(async () => {
    await db.raw('drop trigger if exists refuse_prune on audit_log');
    await db.raw('drop function if exists refuse_prune()');
    await db('audit_checkpoints').delete();
    await db('audit_log').delete();
    await db('audit_log_heads').delete();
  });

  /** `count` records of `org`, all but the last past their 365 days, checkpoints at `at`. */
  async function expiredLog(org: string, count: number, at: number[]): Promise<void> {
    const writer = quietWriter(db);
    const times = Array.from({ length: count - 1 }, (_, i) => NOW - 400 * DAY + i);
    for (const time of [...times, NOW]) writer.record(apiEvent(org, time));
    await writer.close(5000);
    for (const seq of at) {
      const signed = await db('audit_log')
        .where({ org, seq })
        .first<{ hash: string; at: Date }>('hash', 'at');
      await db('audit_checkpoints').insert({
        org,
        seq,
        hash: signed.hash,
        record_at: signed.at,
        at: new Date(NOW),
        kid: 'test',
        jws: 'test',
      });
    }
  }

  /** Deletes of `audit_log` rows matching `condition` (on `old`) raise `raise`. */
  async function refuse(condition: string, raise: string): Promise<void> {
    await db.raw(
      `create function refuse_prune() returns trigger language plpgsql as $$
       begin
         if ${condition} then ${raise}; end if;
         return old;
       end $$`,
    );
    await db.raw(
      'create trigger refuse_prune before delete on audit_log for each row execute function refuse_prune()',
    );
  }

  const seqsOf = async (org: string) =>
    (await db('audit_log').where({ org }).orderBy('seq').pluck<string[]>('seq')).map(Number);

  it('ends the run at the first log when the database is unavailable, telling no log', async () => {
    for (const org of ['one', 'two', 'three']) await expiredLog(org, 4, [3]);
    await refuse('true', "raise exception 'not serving' using errcode = '57P03'");
    const failed: string[] = [];
    const run = pruneAuditLog(db, bounds, clock, { onFailure: (org) => failed.push(org) });
    const err = await run.then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(isDatabaseUnavailable(err)).toBe(true);
    expect(failed).toEqual([]);
    for (const org of ['one', 'two', 'three']) expect(await seqsOf(org)).toEqual([1, 2, 3, 4]);
  });

  it("tells a log's own failure and prunes the others, counting the steps it committed first", async () => {
    // In steps of two records: 1-2 (to checkpoint 2) commits, 3-4 (to checkpoint 4) is refused.
    await expiredLog('partial', 5, [2, 4]);
    await expiredLog('whole', 4, [3]);
    await refuse(
      "old.org = 'partial' and old.seq >= 3",
      "raise exception 'pruning % refused by the test', old.org",
    );
    const failed: { org: string; err: unknown }[] = [];
    const removed = await pruneAuditLog(db, bounds, clock, {
      chunkRecords: 2,
      onFailure: (org, err) => failed.push({ org, err }),
    });
    expect(failed.map(({ org }) => org)).toEqual(['partial']);
    expect((failed[0]!.err as Error).message).toContain('pruning partial refused by the test');
    expect(isDatabaseUnavailable(failed[0]!.err)).toBe(false);
    expect(await seqsOf('partial')).toEqual([3, 4, 5]);
    expect(await seqsOf('whole')).toEqual([4]);
    expect(removed).toBe(2 + 3);
  });
});
