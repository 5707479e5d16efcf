import { randomBytes } from 'node:crypto';
import knex, { type Knex } from 'knex';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBatchAppender } from '../../src/audit/audit-batch.ts';
import { closeAuditWithin } from '../../src/audit/audit.area.ts';
import { scheduleRetention } from '../../src/audit/audit-retention.ts';
import { createAuditWriter } from '../../src/audit/audit-writer.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { systemClock } from '../../src/time/clock.ts';
import { apiEvent } from '../helpers/audit-records.ts';
import { loggerToLines } from '../helpers/log-lines.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { ownDatabase } from '../helpers/postgres-server.ts';

const DAY = 24 * 3600 * 1000;

/**
 * Shutdown while retention prunes (audit.area.ts `close`): the step in progress ends, committed,
 * and no step starts after it; then the pool closes without a failure logged. A whole prune (a
 * year's records) is not waited for, nor cut by the pool closing under it. On a database of the
 * test's own: its retention prunes only this file's logs, the lock it holds on the log stalls no
 * other suite's audit writes, and the prune searches it counts are its own.
 */
const database = ownDatabase('prune');

describe('audit retention at shutdown', () => {
  let db: Knex;
  beforeAll(async () => {
    await database.create();
    db = knex({ client: 'pg', connection: database.url(), pool: { min: 0, max: 4 } });
    await migrateToLatest(db);
  });
  afterAll(async () => {
    await db?.destroy();
    await database.drop();
  });

  it('stopping retention mid-prune lets the step in progress commit and starts no other', async () => {
    const log = `stop-${randomBytes(4).toString('hex')}`;
    const old = Date.now() - 400 * DAY;
    await createBatchAppender(db).append(
      [
        ...Array.from({ length: 1500 }, (_, i) => apiEvent(log, old + i)),
        apiEvent(log, Date.now()),
      ],
      undefined,
      () => undefined,
    );
    // A checkpoint every 100 records: the prefix goes in 14 steps of 100.
    for (let seq = 100; seq <= 1400; seq += 100) {
      const signed = await db('audit_log')
        .where({ org: log, seq })
        .first<{ hash: string; at: Date }>('hash', 'at');
      await db('audit_checkpoints').insert({
        org: log,
        seq,
        hash: signed.hash,
        record_at: signed.at,
        at: new Date(),
        kid: 'test',
        jws: 'test',
      });
    }
    const { logger, lines } = loggerToLines();
    // The gateway's own pool: closed at shutdown right after the audit area.
    const pool: Knex = knex({ client: 'pg', connection: database.url(), pool: { max: 4 } });
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
    await expect.poll(() => stopped !== undefined, EVENTUALLY).toBe(true);
    await stopped;
    await pool.destroy();

    const [first] = await db('audit_log').where({ org: log }).min({ seq: 'seq' });
    expect(Number(first?.seq)).toBe(101);
    // Those the prune stands on (the newest record, 1501, is not signed here).
    const checkpoints = await db('audit_checkpoints')
      .where({ org: log })
      .where('seq', '<=', 1400)
      .orderBy('seq')
      .pluck<string[]>('seq');
    expect(checkpoints.map(Number)).toEqual(Array.from({ length: 14 }, (_, i) => 100 * (i + 1)));
    expect(lines.filter((line) => line.includes('failed'))).toEqual([]);
  });

  it('a shutdown during a prune held in its search takes one grace period, the spool counted', async () => {
    const log = `held-${randomBytes(4).toString('hex')}`;
    const old = Date.now() - 400 * DAY;
    await createBatchAppender(db).append(
      [apiEvent(log, old), apiEvent(log, Date.now())],
      undefined,
      () => undefined,
    );
    const { logger, lines } = loggerToLines();
    const pool: Knex = knex({ client: 'pg', connection: database.url(), pool: { max: 4 } });
    const { writer, lost } = writerCountingLost(pool, logger);
    // Another session holds the log: the prune's search for the records past their days (the
    // statement that may run for minutes) waits, and so does the writer's batch.
    const holder = await db.transaction();
    try {
      await holder.raw('lock table audit_log in access exclusive mode');
      const retention = scheduleRetention({
        db: pool,
        bounds: { defaultDays: 365, minDays: 1, maxDays: 3650 },
        clock: systemClock,
        intervalMs: 3600_000,
        logger,
        firstMs: 0,
      });
      const searching = async () =>
        await db.raw<{ rows: { n: number }[] }>(
          `select count(*)::int as n from pg_stat_activity
            where datname = ? and wait_event_type = 'Lock'
              and query like 'select min("seq") as "first" from "audit_log"%'`,
          [database.name],
        );
      await expect.poll(async () => (await searching()).rows[0]!.n, EVENTUALLY).toBe(1);
      for (let i = 0; i < 3; i++) writer.record(apiEvent(log, Date.now()));

      const graceMs = 1500;
      const began = Date.now();
      await closeAuditWithin(graceMs, { background: [retention], sources: [], writer });
      const took = Date.now() - began;
      // One grace period for all of it (an orchestrator kills a few seconds past it), not one
      // for the prune and then another for the writer.
      expect(took).toBeLessThan(graceMs + 700);
      expect(lost()).toBe(3);
      expect(lines.some((line) => line.includes('audit records lost'))).toBe(true);
      // The prune's search was cancelled at the shutdown: it holds no connection the pool's
      // close would wait for, while the other session still holds the log.
      await expect.poll(async () => (await searching()).rows[0]!.n, EVENTUALLY).toBe(0);
      await retention.stop();
    } finally {
      await holder.rollback();
      await pool.destroy();
    }
    expect(lines.filter((line) => line.includes('pruning failed'))).toEqual([]);
  });

  it('a source that does not stop in time leaves the writer its share of the grace period', async () => {
    const log = `stuck-${randomBytes(4).toString('hex')}`;
    const pool: Knex = knex({ client: 'pg', connection: database.url(), pool: { max: 2 } });
    const { writer, lost } = writerCountingLost(pool, pino({ level: 'silent' }));
    try {
      for (let i = 0; i < 3; i++) writer.record(apiEvent(log, Date.now()));
      const graceMs = 1500;
      const began = Date.now();
      // A download job or a Keycloak pull that does not end: the database is fine.
      const never = () => new Promise<void>(() => undefined);
      await closeAuditWithin(graceMs, { background: [], sources: [never, never], writer });
      expect(Date.now() - began).toBeLessThan(graceMs + 700);
      expect(lost()).toBe(0);
      expect(await db('audit_log').where({ org: log }).count<{ n: number }[]>('* as n')).toEqual([
        { n: '3' },
      ]);
    } finally {
      await pool.destroy();
    }
  });
});

/** A writer whose batches wait for the shutdown (an hour apart), and what it counted lost. */
function writerCountingLost(db: Knex, logger: pino.Logger) {
  let lost = 0;
  const writer = createAuditWriter({
    db,
    logger,
    metrics: {
      auditRecords: (outcome, count) => {
        if (outcome === 'lost') lost += count;
      },
    },
    spoolMax: 1000,
    batchMax: 500,
    intervalMs: 3600_000,
  });
  return { writer, lost: () => lost };
}
