import os from 'node:os';
import type { Knex } from 'knex';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAuditLogRepo } from '../../src/audit/audit-log.repo.ts';
import { createDownloadJobs } from '../../src/audit/download-jobs.ts';
import { isDatabaseUnavailable } from '../../src/db/database-failures.ts';
import { openDatabase, runSpared, type DatabaseTimeouts } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { createLogger } from '../../src/http/logger.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { ownDatabase } from '../helpers/postgres-server.ts';
import { startTcpFront, type TcpFront } from '../helpers/tcp-front.ts';
import { manualClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/*
 * Spared work (runSpared: audit exports, download jobs, retention pruning) runs past the
 * request limits, but not for ever: a lock another session holds, or a connection that went
 * silent, fails it within DATABASE_SPARED_TIMEOUT_MS. On a database of the test's own, so the
 * lock it takes on the audit log stalls no other suite. Port 18873 (relay).
 */

const database = ownDatabase('spared');
const TIMEOUTS: DatabaseTimeouts = { connectMs: 200, statementMs: 300, sparedMs: 1500 };

describe('spared database work under a bound of its own', () => {
  let db: Knex;
  let holder: pg.Client | undefined;

  beforeAll(async () => {
    await database.create();
    db = await openDatabase({
      databaseUrl: database.url(),
      dataDir: os.tmpdir(),
      timeouts: TIMEOUTS,
    });
    await migrateToLatest(db);
  });

  afterEach(async () => {
    await holder?.end();
    holder = undefined;
  });

  afterAll(async () => {
    await db?.destroy();
    await database.drop();
  });

  /** Another session holding the audit log locked against every read until the test ends. */
  async function lockAuditLog(): Promise<void> {
    holder = new pg.Client({ connectionString: database.url() });
    await holder.connect();
    await holder.query('begin');
    await holder.query('lock table audit_log in access exclusive mode');
  }

  it('cuts spared work waiting on a lock past its bound, not before the request limit', async () => {
    await lockAuditLog();
    const started = Date.now();
    const failure: unknown = await runSpared(db, (trx) => trx('audit_log').count()).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toMatchObject({ code: '57014' });
    expect(isDatabaseUnavailable(failure)).toBe(true);
    // Spared from the statement timeout (300 ms), bound by its own (1.5 s).
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUTS.sparedMs - 50);
  }, 20_000);

  it('starts no work once its signal has aborted, before or while it waits for a connection', async () => {
    const started: string[] = [];
    const attempt = (name: string, signal: AbortSignal) =>
      runSpared(
        db,
        (trx) => {
          started.push(name);
          return trx.raw('select 1');
        },
        {},
        signal,
      ).then(
        () => undefined,
        (err: unknown) => err,
      );
    // A shutdown begun before the work was asked for.
    const before = new AbortController();
    before.abort();
    expect(await attempt('before', before.signal)).toBe(before.signal.reason);
    // One begun while the work waits for its connection (runSpared's first wait).
    const during = new AbortController();
    const asked = attempt('during', during.signal);
    during.abort();
    expect(await asked).toBe(during.signal.reason);
    expect(started).toEqual([]);
    // Their connection went back to the pool: spared work runs after them.
    expect(
      (await runSpared(db, (trx) => trx.raw<{ rows: unknown[] }>('select 1 as one'))).rows,
    ).toEqual([{ one: 1 }]);
  });

  it('fails a download job whose count waits on a lock, and an export, with an error', async () => {
    await lockAuditLog();
    const clock = manualClock();
    const jobs = createDownloadJobs(db, clock, createLogger('silent'));
    const org = { org: `spared-${Date.now()}`, whole: false };
    const id = await jobs.create(
      org,
      {
        conditions: { ts_from: '2026-01-01 00:00:00', ts_to: '2026-01-01 00:00:01' },
        fromMs: Date.UTC(2026, 0, 1),
        toMs: Date.UTC(2026, 0, 1, 0, 0, 1),
      },
      { id: 'someone', name: 'someone' },
    );
    await jobs.runWaiting();
    expect(await jobs.list(org, id)).toMatchObject([
      { status: 'Failed', message: 'Reading the audit log failed.' },
    ]);

    // An export's chunk: the error reaches the route (503 before its first line, else a cut
    // download), not a request that never ends.
    const records = createAuditLogRepo(db).records(org.org, {}, { first: 1, last: 10 });
    await expect(records.next()).rejects.toMatchObject({ code: '57014' });
  }, 20_000);
  it("does not take a download job's run as lost while its statements may still be running", async () => {
    // The longest spared bound there is: one run's statements may each take ten minutes.
    const patient = await openDatabase({
      databaseUrl: database.url(),
      dataDir: os.tmpdir(),
      timeouts: { ...TIMEOUTS, sparedMs: 600_000 },
    });
    let running: Promise<void> | undefined;
    try {
      await lockAuditLog();
      const clock = manualClock();
      const mine = createDownloadJobs(patient, clock, createLogger('silent'));
      // Another replica's sweep, on the same clock.
      const other = createDownloadJobs(patient, clock, createLogger('silent'));
      const org = { org: `patient-${Date.now()}`, whole: false };
      const id = await mine.create(
        org,
        {
          conditions: { ts_from: '2026-01-01 00:00:00', ts_to: '2026-01-01 00:00:01' },
          fromMs: Date.UTC(2026, 0, 1),
          toMs: Date.UTC(2026, 0, 1, 0, 0, 1),
        },
        { id: 'someone', name: 'someone' },
      );
      running = mine.runWaiting();
      await expect
        .poll(async () => (await mine.list(org, id))[0]?.status, EVENTUALLY)
        .toBe('Executing');
      // Eleven minutes into the run, its count still waiting (on the lock here).
      clock.advance(11 * 60_000);
      await other.sweep();
      expect((await mine.list(org, id))[0]?.status).toBe('Executing');
      await holder?.query('rollback');
      await running;
      expect((await mine.list(org, id))[0]?.status).toBe('NoData');
    } finally {
      // The run lets its connection go once the lock is gone; the pool closes after it.
      await holder?.end();
      holder = undefined;
      await running;
      await patient.destroy();
    }
  }, 20_000);
});

describe('spared database work on a connection that goes silent', () => {
  let front: TcpFront;
  let db: Knex;

  beforeAll(async () => {
    const direct = new URL(testEnv().databaseUrl);
    front = await startTcpFront(18873, {
      host: direct.hostname,
      port: Number(direct.port || 5432),
    });
    // The test stack's database (this suite's own is gone with the describe above), relayed.
    const relayed = new URL(direct);
    relayed.host = `127.0.0.1:${front.port}`;
    db = await openDatabase({
      databaseUrl: relayed.href,
      dataDir: os.tmpdir(),
      timeouts: TIMEOUTS,
    });
  });

  afterAll(async () => {
    front?.unsilence();
    await db?.destroy();
    await front?.cut();
  });

  it('drops the connection once nothing answered for the connect and spared bounds', async () => {
    // A pooled connection first, so the silence falls on one made before it.
    await runSpared(db, (trx) => trx.raw('select 1'));
    front.silence();
    const started = Date.now();
    const failure: unknown = await runSpared(db, (trx) => trx.raw('select 1')).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isDatabaseUnavailable(failure)).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUTS.sparedMs);
    front.unsilence();
    // The pool makes a new connection, which works.
    expect(
      (await runSpared(db, (trx) => trx.raw<{ rows: unknown[] }>('select 1 as one'))).rows,
    ).toEqual([{ one: 1 }]);
  }, 20_000);
});
