import type { Knex } from 'knex';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { verifyChain, type AuditRecord } from '../../../src/audit/audit-chain.ts';
import { jsonLine } from '../../../src/audit/audit-export.ts';
import { createAuditLogRepo } from '../../../src/audit/audit-log.repo.ts';
import {
  createDownloadJobs,
  runDownloadJobs,
  type DownloadJobs,
} from '../../../src/audit/download-jobs.ts';
import { rangeOf } from '../../../src/audit/download-jobs.schemas.ts';
import { zipOfOne } from '../../../src/audit/download-zip.ts';
import { createLongReads } from '../../../src/audit/long-reads.ts';
import { createLogger } from '../../../src/http/logger.ts';
import { UNSET_FIELDS } from '../../../src/audit/unset-fields.ts';
import { apiEvent, quietWriter } from '../../helpers/audit-records.ts';
import { openEmbeddedDatabase } from '../../helpers/embedded-db.ts';
import { manualClock } from '../../helpers/test-clock.ts';
import { readZip } from '../../helpers/zip-reader.ts';

/** An organization's readers' jobs (download-jobs.ts). */
const own = (org: string) => ({ org, whole: false });

const logger = createLogger('silent');
const NOV_1 = Date.UTC(2026, 10, 1);

/** A download's range as the reference's page sends it. */
function range(tsFrom: string, tsTo: string) {
  const conditions = { ts_from: tsFrom, ts_to: tsTo };
  return { conditions, ...rangeOf(conditions) };
}

/**
 * Download jobs on the embedded PostgreSQL: their states, what a finished one covers (fixed when
 * it ran), the zip made of it, the stale-run and retention sweeps. Replicas sharing one
 * PostgreSQL: test/integration/audit-download.test.ts.
 */
describe('audit download jobs', () => {
  let close: () => Promise<void>;
  let db: Knex;
  const clock = manualClock(Date.UTC(2026, 10, 2));

  beforeAll(async () => {
    ({ db, close } = await openEmbeddedDatabase('audit-downloads'));
    const writer = quietWriter(db);
    // acme: one record a minute from Nov 1, 00:00 to 04:59 UTC.
    for (let n = 0; n < 300; n++) {
      writer.record(
        apiEvent('acme', NOV_1 + n * 60_000, {
          actorName: `user${n}`,
          tokenId: `jti-${n}`,
          address: null,
        }),
      );
    }
    await writer.flush();
    await writer.close(1000);
  }, 120_000);

  afterAll(() => close());

  it('runs a waiting job: Completion with the count of its range, both ends included', async () => {
    const jobs = createDownloadJobs(db, clock, logger);
    const creator = { id: 'u1', name: 'alice' };
    const id = await jobs.create(
      own('acme'),
      range('2026-11-01 01:00:00', '2026-11-01 01:59:00'),
      creator,
    );
    const empty = await jobs.create(
      own('acme'),
      range('2026-10-01 00:00:00', '2026-10-31 23:59:59'),
      creator,
    );
    expect((await jobs.list(own('acme'), id))[0]).toMatchObject({
      status: 'NotExecuted',
      count_export: null,
    });
    await expect(jobs.finished(own('acme'), id)).rejects.toMatchObject({ result: '409-40001' });
    await jobs.runWaiting();
    const [done] = await jobs.list(own('acme'), id);
    expect(done).toMatchObject({
      download_id: id,
      status: 'Completion',
      count_export: 60,
      create_user_name: 'alice',
      conditions: '{"ts_from":"2026-11-01 01:00:00","ts_to":"2026-11-01 01:59:00"}',
      create_timestamp: '2026-11-02T00:00:00.000Z',
    });
    expect((await jobs.list(own('acme'), empty))[0]).toMatchObject({
      status: 'NoData',
      count_export: 0,
    });
    expect((await jobs.list(own('acme'))).map((j) => j.download_id)).toEqual(
      expect.arrayContaining([id, empty]),
    );
    expect(await jobs.list(own('globex'))).toEqual([]);
    await expect(jobs.finished(own('globex'), id)).rejects.toMatchObject({ result: '404-40001' });
  });

  it('waits, NotExecuted, while the exports and downloads hold every slot, then runs', async () => {
    const longReads = createLongReads(1);
    const jobs = createDownloadJobs(db, clock, logger, longReads);
    const id = await jobs.create(own('acme'), range('2026-11-01 02:00:00', '2026-11-01 02:09:00'), {
      id: 'u1',
      name: 'alice',
    });
    const exporting = longReads.take();
    const running = jobs.runWaiting();
    expect((await jobs.list(own('acme'), id))[0]).toMatchObject({ status: 'NotExecuted' });
    exporting.release();
    await running;
    expect((await jobs.list(own('acme'), id))[0]).toMatchObject({
      status: 'Completion',
      count_export: 10,
    });
    // The run gave its slot back.
    longReads.take().release();
  });

  it('zips what the job covered when it ran, not what came after', async () => {
    const jobs = createDownloadJobs(db, clock, logger);
    const id = await jobs.create(
      own('acme'),
      range('2026-11-01T00:00:00Z', '2026-11-01T09:00:00+09:00'),
      { id: 'u1', name: 'alice' },
    );
    await jobs.runWaiting();
    const job = await jobs.finished(own('acme'), id);
    // A record of the range written later (a late batch) is not in this job's file.
    const writer = quietWriter(db);
    writer.record({
      ...UNSET_FIELDS,
      org: 'acme',
      atMs: NOV_1 + 30_000,
      action: 'late',
      outcome: 'success',
      tokenId: 'jti-late',
      details: {},
    });
    await writer.close(1000);

    const repo = createAuditLogRepo(db);
    const span = await repo.span('acme', { from: job.fromIso, to: job.toIso }, job.lastSeq);
    const lines = (async function* () {
      for await (const record of repo.records('acme', {}, span)) {
        yield jsonLine(record);
      }
    })();
    const chunks: Buffer[] = [];
    for await (const chunk of zipOfOne('acme.log', lines, new Date(job.toIso)))
      chunks.push(Buffer.from(chunk));
    const [entry, ...more] = readZip(Buffer.concat(chunks));
    expect(more).toEqual([]);
    expect(entry!.name).toBe('acme.log');
    const records = entry!.content
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as AuditRecord);
    // 00:00:00 to 00:00:00 (+09:00 is midnight UTC), to the second: one record.
    expect(records.map((r) => r.at)).toEqual(['2026-11-01T00:00:00.000Z']);
    expect(verifyChain(records)).toBeUndefined();
  });

  it('fails a run whose replica went away, and deletes jobs after 7 days', async () => {
    const jobs = createDownloadJobs(db, clock, logger);
    const id = await jobs.create(
      own('initech'),
      range('2026-11-01 00:00:00', '2026-11-02 00:00:00'),
      {
        id: 'u',
        name: 'u',
      },
    );
    await db('audit_download_jobs').where({ id }).update({ status: 'Executing' });
    clock.advance(10 * 60_000 + 1);
    await jobs.sweep();
    const [failed] = await jobs.list(own('initech'));
    expect(failed?.status).toBe('Failed');
    expect(failed?.message).toContain('interrupted');
    clock.advance(7 * 86_400_000);
    await jobs.sweep();
    expect(await jobs.list(own('initech'))).toEqual([]);
  });

  it('lists a run whose replica went away as Failed without waiting for a sweep (the log off: no poll)', async () => {
    const jobs = createDownloadJobs(db, clock, logger);
    const id = await jobs.create(
      own('vandelay'),
      range('2026-11-01 00:00:00', '2026-11-02 00:00:00'),
      { id: 'u', name: 'u' },
    );
    await db('audit_download_jobs').where({ id }).update({ status: 'Executing' });
    expect((await jobs.list(own('vandelay')))[0]?.status).toBe('Executing');
    clock.advance(10 * 60_000 + 1);
    const [failed] = await jobs.list(own('vandelay'));
    expect(failed?.status).toBe('Failed');
    expect(failed?.message).toContain('interrupted');
    expect((await jobs.list(own('vandelay'), id))[0]?.status).toBe('Failed');
  });

  it("runs one organization's waiting jobs in turn with another's, not all before them", async () => {
    // Each reading of the clock a second later: the jobs' last updates tell the order they ran.
    const stepping = manualClock(clock.now());
    const tick = { now: () => (stepping.advance(1000), stepping.now()) };
    const jobs = createDownloadJobs(db, tick, logger);
    const creator = { id: 'u', name: 'u' };
    const whole = range('2026-11-01 00:00:00', '2026-11-02 00:00:00');
    const many: string[] = [];
    for (let n = 0; n < 3; n++) many.push(await jobs.create(own('hooli'), whole, creator));
    const late = await jobs.create(own('umbrella'), whole, creator);
    await jobs.runWaiting();
    const ran = [...(await jobs.list(own('hooli'))), ...(await jobs.list(own('umbrella')))]
      .sort((a, b) => a.last_update_timestamp.localeCompare(b.last_update_timestamp))
      .map((job) => job.download_id);
    expect(ran).toEqual([many[0], late, many[1], many[2]]);
  });

  it('refuses ranges backwards, too long or not in the calendar', () => {
    expect(() => range('2026-11-02 00:00:00', '2026-11-01 00:00:00')).toThrow(
      'ts_to: before ts_from',
    );
    expect(() => range('2025-01-01 00:00:00', '2026-01-03 00:00:00')).toThrow('more than 366 days');
    expect(() => range('2026-02-29 00:00:00', '2026-03-01 00:00:00')).toThrow(
      'ts_from: no such date',
    );
    expect(range('2024-02-29 00:00:00', '2024-02-29 23:59:59').fromMs).toBe(Date.UTC(2024, 1, 29));
  });
});

describe('the download jobs runner', () => {
  afterEach(() => vi.useRealTimers());

  const countingJobs = () => {
    const calls: string[] = [];
    const jobs = {
      sweep: () => (calls.push('sweep'), Promise.resolve()),
      runWaiting: () => (calls.push('run'), Promise.resolve()),
    } as Pick<DownloadJobs, 'sweep' | 'runWaiting'> as DownloadJobs;
    return { calls, jobs };
  };

  it('without a poll (the audit log off) keeps no timer; a started job is swept and run', async () => {
    vi.useFakeTimers();
    const { calls, jobs } = countingJobs();
    const runner = runDownloadJobs(jobs, { pollMs: undefined, logger });
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toEqual([]);
    runner.kick();
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toEqual(['sweep', 'run']);
    await runner.close();
  });

  it('with a poll, looks every interval until closed', async () => {
    vi.useFakeTimers();
    const { calls, jobs } = countingJobs();
    const runner = runDownloadJobs(jobs, { pollMs: 5000, logger });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(calls).toEqual(['sweep', 'run', 'sweep', 'run']);
    await runner.close();
    expect(vi.getTimerCount()).toBe(0);
  });
});
