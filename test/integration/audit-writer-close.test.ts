import { randomBytes } from 'node:crypto';
import knex from 'knex';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { verifyChain } from '../../src/audit/audit-chain.ts';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import { createAuditWriter } from '../../src/audit/audit-writer.ts';
import { createLogger } from '../../src/http/logger.ts';
import { apiEvent } from '../helpers/audit-records.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { closeTestDb, testDb } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * A shutdown writes the spool within its grace, whatever one failed write: a pooled connection
 * reset at that moment (a PostgreSQL failover of a rolling deploy, an administrator's
 * pg_terminate_backend) is tried again, not taken as the database gone for the rest of the
 * grace. The test database; the writer's connection is the one PostgreSQL terminates.
 */
describe('audit writer: a write that fails at shutdown', () => {
  afterAll(() => closeTestDb());

  it('is tried again within the grace, and the spool is written', async () => {
    const quiet = () => undefined;
    const name = `audit-close-${randomBytes(5).toString('hex')}`;
    const db = knex({
      client: 'pg',
      connection: { connectionString: testEnv().databaseUrl, application_name: name },
      pool: { min: 0, max: 1 },
      // Its connection terminated is the test, not news.
      log: { warn: quiet, error: quiet, deprecate: quiet, debug: quiet },
    });
    const counts = { written: 0, lost: 0 };
    const writer = createAuditWriter({
      db,
      logger: createLogger('silent'),
      metrics: { auditRecords: (outcome, n) => (counts[outcome] += n) },
      spoolMax: 1000,
      batchMax: 100,
      intervalMs: 60_000,
    });
    const org = `closing${randomBytes(5).toString('hex')}`;
    const at = Date.now();
    const event = (n: number) => apiEvent(org, at + n, { details: { n: String(n) } });
    // The log's head row, which each batch locks, is there once one is written.
    writer.record(event(0));
    await writer.flush();

    // The test holds the head row: the shutdown's write waits on it until its connection is
    // terminated, then the row is let go.
    const holder = await testDb().transaction();
    try {
      await holder('audit_log_heads').where({ org }).forUpdate().first();
      for (let n = 1; n <= 20; n++) writer.record(event(n));
      const closed = writer.close(30_000);
      const pid = await vi.waitFor(async () => {
        const [waiting] = (await testDb()
          .select('pid')
          .from('pg_stat_activity')
          .where({ application_name: name, wait_event_type: 'Lock' })) as { pid: number }[];
        if (!waiting) throw new Error('the write is not waiting on the row yet');
        return waiting.pid;
      }, EVENTUALLY);
      await testDb().raw('select pg_terminate_backend(?)', [pid]);
      // Gone before the row is let go: its write fails, it does not go on to commit.
      await expect
        .poll(async () => (await testDb()('pg_stat_activity').where({ pid })).length, EVENTUALLY)
        .toBe(0);
      await holder.rollback();
      await closed;
    } finally {
      if (!holder.isCompleted()) await holder.rollback();
      await db.destroy();
    }

    expect(counts).toEqual({ written: 21, lost: 0 });
    const records = (await testDb()<AuditRow>('audit_log').where({ org }).orderBy('seq')).map(
      recordOf,
    );
    expect(records.map((r) => r.details.n)).toEqual(
      Array.from({ length: 21 }, (_, n) => String(n)),
    );
    expect(verifyChain(records)).toBeUndefined();
  });
});
