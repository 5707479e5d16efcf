import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createBatchAppender } from '../../src/audit/audit-batch.ts';
import { scheduleRetention } from '../../src/audit/audit-retention.ts';
import { systemClock } from '../../src/time/clock.ts';
import { apiEvent } from '../helpers/audit-records.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { loggerToRecords } from '../helpers/log-lines.ts';
import { closeTestDb, testDb } from '../helpers/platform.ts';

const DAY = 24 * 3600 * 1000;

/**
 * A retention run against the real PostgreSQL when one organization's log cannot be pruned (a
 * trigger refuses its deletes, as a bad row would): that organization's failure is logged with
 * its id, and every other log is pruned all the same. (The database unavailable ends the run:
 * test/unit/audit/audit-retention-failures.test.ts.)
 */
describe('audit retention: one log failing', () => {
  afterAll(async () => {
    await closeTestDb();
  });

  /** Three records past the limit (a checkpoint on the third) and one within it. */
  async function expiredLog(org: string): Promise<void> {
    const old = Date.now() - 400 * DAY;
    await createBatchAppender(testDb()).append(
      [...[0, 1, 2].map((i) => apiEvent(org, old + i)), apiEvent(org, Date.now())],
      undefined,
      () => undefined,
    );
    const signed = await testDb()('audit_log')
      .where({ org, seq: 3 })
      .first<{ hash: string; at: Date }>('hash', 'at');
    await testDb()('audit_checkpoints').insert({
      org,
      seq: 3,
      hash: signed.hash,
      record_at: signed.at,
      at: new Date(),
      kid: 'test',
      jws: 'test',
    });
  }

  const seqsOf = async (org: string) =>
    (await testDb()('audit_log').where({ org }).orderBy('seq').pluck<string[]>('seq')).map(Number);

  it("prunes every other organization's log when one's prune fails, and logs which one failed", async () => {
    const suffix = randomBytes(4).toString('hex');
    const failing = `failing-${suffix}`;
    // Logs made before and after the failing one: whichever order the run takes them in.
    const before = `before-${suffix}`;
    const after = `after-${suffix}`;
    await expiredLog(before);
    await expiredLog(failing);
    await expiredLog(after);
    const refuse = `refuse_prune_${suffix}`;
    await testDb().raw(
      `create function ${refuse}() returns trigger language plpgsql as $$
       begin
         if old.org = '${failing}' then raise exception 'pruning % refused by the test', old.org; end if;
         return old;
       end $$`,
    );
    await testDb().raw(
      `create trigger ${refuse} before delete on audit_log for each row execute function ${refuse}()`,
    );
    const { logger, records } = loggerToRecords();
    const retention = scheduleRetention({
      db: testDb(),
      bounds: { defaultDays: 365, minDays: 1, maxDays: 3650 },
      clock: systemClock,
      intervalMs: 3600_000,
      logger,
      firstMs: 0,
    });
    try {
      const failure = () => records.find((record) => record.org === failing);
      await expect
        .poll(
          async () => ({
            before: await seqsOf(before),
            after: await seqsOf(after),
            failed: failure() !== undefined,
          }),
          EVENTUALLY,
        )
        .toEqual({ before: [4], after: [4], failed: true });
      const { level, err } = failure() as { level: number; err: { message: string } };
      expect(level).toBe(40);
      expect(err.message).toContain(`pruning ${failing} refused by the test`);
      expect(await seqsOf(failing)).toEqual([1, 2, 3, 4]);
    } finally {
      await retention.stop();
      await testDb().raw(`drop trigger if exists ${refuse} on audit_log`);
      await testDb().raw(`drop function if exists ${refuse}()`);
    }
  });
});
