import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import knex, { type Knex } from 'knex';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { createBatchAppender } from '../../src/audit/audit-batch.ts';
import { scheduleRetention } from '../../src/audit/audit-retention.ts';
import { systemClock } from '../../src/time/clock.ts';
import { apiEvent } from '../helpers/audit-records.ts';
import { closeTestDb, testDb } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

const DAY = 24 * 3600 * 1000;

/**
 * Shutdown while retention prunes (audit.area.ts `close`): the step in progress ends, committed,
 * and no step starts after it; then the pool closes without a failure logged. A whole prune (a
 * year's records) is not waited for, nor cut by the pool closing under it.
 */
describe('audit retention at shutdown', () => {
  afterAll(async () => {
    await closeTestDb();
  });

  it('stopping retention mid-prune lets the step in progress commit and starts no other', async () => {
    const log = `stop-${randomBytes(4).toString('hex')}`;
    const old = Date.now() - 400 * DAY;
    await createBatchAppender(testDb()).append(
      [
        ...Array.from({ length: 1500 }, (_, i) => apiEvent(log, old + i)),
        apiEvent(log, Date.now()),
      ],
      undefined,
      () => undefined,
    );
    // A checkpoint every 100 records: the prefix goes in 14 steps of 100.
    for (let seq = 100; seq <= 1400; seq += 100) {
      const signed = await testDb()('audit_log')
        .where({ org: log, seq })
        .first<{ hash: string; at: Date }>('hash', 'at');
      await testDb()('audit_checkpoints').insert({
        org: log,
        seq,
        hash: signed.hash,
        record_at: signed.at,
        at: new Date(),
        kid: 'test',
        jws: 'test',
      });
    }
    const lines: string[] = [];
    const logger = pino(
      { level: 'info' },
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          lines.push(chunk.toString());
          done();
        },
      }),
    );
    // The gateway's own pool: closed at shutdown right after the audit area.
    const pool: Knex = knex({ client: 'pg', connection: testEnv().databaseUrl, pool: { max: 4 } });
    const retention = scheduleRetention({
      db: pool,
      bounds: { defaultDays: 365, minDays: 1, maxDays: 3650 },
      clock: systemClock,
      intervalMs: 3600_000,
      logger,
      firstMs: 0,
      chunkRecords: 100,
    });
    // The shutdown begins while the first step of this log runs (its last statement).
    let stopped: Promise<void> | undefined;
    pool.on('query', (query: { sql: string; bindings?: unknown[] }) => {
      if (stopped || !/^delete from "audit_checkpoints"/.test(query.sql)) return;
      if (query.bindings?.includes(log)) stopped = retention.stop();
    });
    await expect.poll(() => stopped !== undefined, { timeout: 30_000 }).toBe(true);
    await stopped;
    await pool.destroy();

    const [first] = await testDb()('audit_log').where({ org: log }).min({ seq: 'seq' });
    expect(Number(first?.seq)).toBe(101);
    const checkpoints = await testDb()('audit_checkpoints')
      .where({ org: log })
      .orderBy('seq')
      .pluck<string[]>('seq');
    expect(checkpoints.map(Number)).toEqual(Array.from({ length: 14 }, (_, i) => 100 * (i + 1)));
    expect(lines.filter((line) => line.includes('failed'))).toEqual([]);
  });
});
