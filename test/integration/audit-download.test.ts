import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChainFollower, type AuditRecord } from '../../src/audit/audit-chain.ts';
import {
  createDownloadJobs,
  DOWNLOAD_JOBS_MAX,
  DOWNLOAD_RETENTION_MS,
} from '../../src/audit/download-jobs.ts';
import type { DownloadJob } from '../../src/audit/download-jobs.schemas.ts';
import { createLogger } from '../../src/http/logger.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import { grantReaderRole } from '../helpers/audit-readers.ts';
import { insertLargeLog } from '../helpers/audit-records.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { manualClock } from '../helpers/test-clock.ts';
import { readZip } from '../helpers/zip-reader.ts';

/** An organization's readers' jobs (download-jobs.ts). */
const own = (org: string) => ({ org, whole: false });

/** The reference platform's `YYYY-MM-DD HH:MM:SS`, in UTC. */
const referenceTime = (ms: number) => new Date(ms).toISOString().slice(0, 19).replace('T', ' ');

/** The records of a download's file, without the keys and checkpoints that verify them. */
const recordsOf = (content: Buffer) =>
  content
    .toString('utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as AuditRecord & { type?: string })
    .filter((line) => line.type === undefined);

/**
 * The reference platform's audit log downloads: a job started on one replica runs once and is
 * downloaded from another, as a zip of JSON Lines that verify; hostile requests get the
 * envelope; starts and downloads are recorded; jobs are bounded in number and time.
 * Ports 19840-19843.
 */
describe('audit log: download jobs', () => {
  let one: Replica;
  let two: Replica;
  let org: string;
  let reader: TestUser;
  let member: TestUser;
  let foreignReader: TestUser;

  beforeAll(async () => {
    [one, two] = await Promise.all([startReplica(19840), startReplica(19842)]);
    org = await createOrganization(['ws1']);
    const other = await createOrganization(['ws1']);
    [reader, member, foreignReader] = await Promise.all([
      createUser(org, { workspaceRoles: ['ws1'] }),
      createUser(org, { workspaceRoles: ['ws1'] }),
      createUser(other, { workspaceRoles: ['ws1'] }),
    ]);
    await Promise.all([grantReaderRole(reader), grantReaderRole(foreignReader)]);
  });

  afterAll(async () => {
    await Promise.all([one?.gateway.close(), two?.gateway.close()]);
    await closeTestDb();
  });

  const downloads = () => `/api/${org}/platform/auditlog/download`;
  const start = (body: unknown, user = reader, replica = one) =>
    callApi(downloads(), basicAuth(user), {
      base: replica.url,
      method: 'POST',
      body,
    });
  const jobsOf = async (replica: Replica, query = '') =>
    (
      await callApi(`/api/${org}/platform/auditlog/download${query}`, basicAuth(reader), {
        base: replica.url,
      })
    ).body.data as DownloadJob[];

  /** Waits, on `replica`, until the job is done running. */
  async function finishedJob(id: string, replica: Replica): Promise<DownloadJob> {
    let job: DownloadJob | undefined;
    await expect
      .poll(async () => {
        [job] = await jobsOf(replica, `?download_id=${id}`);
        return job?.status;
      }, EVENTUALLY)
      .toMatch(/^(Completion|NoData|Failed)$/);
    return job!;
  }

  /** A form post as the reference's web page downloads: the credentials in the form. */
  const formDownload = (id: string, authorization: string, replica = two) =>
    fetch(`${replica.url}${downloads()}/${id}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ authorization }).toString(),
    });

  it('runs a job started on one replica and serves its zip from another, by form post', async () => {
    const from = Date.now() - 1000;
    for (let i = 0; i < 3; i++) {
      const listed = await callApi(`/api/${org}/platform/workspaces`, basicAuth(member), {
        base: one.url,
      });
      expect(listed.status).toBe(200);
    }
    // Written (off the request path) before the job fixes what it covers.
    await expect
      .poll(async () => {
        const page = await callApi(
          `/api/${org}/platform/audit-log?actor=${member.username}`,
          basicAuth(reader),
          { base: one.url },
        );
        return (page.body.data as { total: number }).total;
      }, EVENTUALLY)
      .toBeGreaterThanOrEqual(3);
    const range = { ts_from: referenceTime(from), ts_to: referenceTime(Date.now() + 60_000) };
    const started = await start(range);
    expect(started.status).toBe(200);
    expect(started.body.result).toBe('000-00000');
    const id = (started.body.data as { download_id: string }).download_id;

    const job = await finishedJob(id, two);
    expect(job).toMatchObject({
      download_id: id,
      status: 'Completion',
      create_user_name: reader.username,
      message: null,
    });
    expect(job.create_user_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.parse(job.conditions)).toEqual(range);
    expect(job.count_export).toBeGreaterThanOrEqual(3);
    expect((await jobsOf(one)).map((j) => j.download_id)).toContain(id);

    const res = await formDownload(id, basicAuth(reader));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/zip');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="audit-log.zip"');
    const entries = readZip(Buffer.from(await res.arrayBuffer()));
    const day = (text: string) => text.slice(0, 10).replaceAll('-', '');
    expect(entries.map((e) => e.name)).toEqual([
      `exastro_audit_${day(range.ts_from)}-${day(range.ts_to)}.log`,
    ]);
    const records = recordsOf(entries[0]!.content);
    expect(records).toHaveLength(job.count_export!);
    const follower = createChainFollower();
    for (const record of records) expect(follower.next(record)).toBeUndefined();
    expect(records.filter((r) => r.actorName === member.username).length).toBeGreaterThanOrEqual(3);
    expect(records.every((r) => Date.parse(r.at) >= Date.parse(`${range.ts_from}Z`))).toBe(true);

    // The same file again, whatever was written since: a job covers the log as it ran.
    const again = await fetch(`${one.url}${downloads()}/${id}`, {
      method: 'POST',
      headers: { authorization: basicAuth(reader) },
    });
    expect(recordsOf(readZip(Buffer.from(await again.arrayBuffer()))[0]!.content)).toEqual(records);
  });

  it('says NoData for a range without records, and refuses its download (409)', async () => {
    const started = await start({ ts_from: '2020-01-01 00:00:00', ts_to: '2020-01-31 23:59:59' });
    const id = (started.body.data as { download_id: string }).download_id;
    expect(await finishedJob(id, one)).toMatchObject({ status: 'NoData', count_export: 0 });
    const res = await formDownload(id, basicAuth(reader));
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ result: '409-40001', data: null });
  });

  it('refuses the download of a job whose records retention removed since it ran: 409, no zip begun', async () => {
    // A deleted organization's log kept for its retention, read by a platform administrator.
    const log = `pruned-${Date.now()}`;
    await insertLargeLog(testDb(), log, 10);
    const admin = await createUser('master');
    const path = `/api/platform/organizations/${log}/auditlog/download`;
    const range = {
      ts_from: referenceTime(Date.now() - 3_600_000),
      ts_to: referenceTime(Date.now() + 60_000),
    };
    const started = await callApi(path, basicAuth(admin), {
      base: one.url,
      method: 'POST',
      body: range,
    });
    const id = (started.body.data as { download_id: string }).download_id;
    await expect
      .poll(async () => {
        const listed = await callApi(`${path}?download_id=${id}`, basicAuth(admin), {
          base: one.url,
        });
        return (listed.body.data as DownloadJob[])[0]?.status;
      }, EVENTUALLY)
      .toBe('Completion');
    // Retention removes the log's oldest records, the job's first among them.
    await testDb()('audit_log').where({ org: log }).where('seq', '<=', 3).del();
    const res = await fetch(`${two.url}${path}/${id}`, {
      method: 'POST',
      headers: { authorization: basicAuth(admin) },
    });
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ result: '409-40002', data: null });
    // The shared database keeps no log of this test's making.
    for (const table of [
      'audit_download_jobs',
      'audit_checkpoints',
      'audit_log',
      'audit_log_heads',
    ]) {
      await testDb()(table).where({ org: log }).del();
    }
  });

  it('answers hostile requests in the envelope', async () => {
    const refusals: [unknown, string][] = [
      [{ ts_from: '2026-13-01 00:00:00', ts_to: '2026-12-01 00:00:00' }, 'ts_from'],
      [{ ts_from: '2026-02-30 00:00:00', ts_to: '2026-03-01 00:00:00' }, 'ts_from'],
      [{ ts_from: 'yesterday', ts_to: '2026-03-01 00:00:00' }, 'ts_from'],
      [{ ts_from: '2026-03-01 00:00:00', ts_to: '2026-02-01 00:00:00' }, 'before ts_from'],
      [{ ts_from: '2020-01-01 00:00:00', ts_to: '2026-01-01 00:00:00' }, 'more than 366 days'],
      [{ ts_from: '2026-03-01 00:00:00' }, 'ts_to'],
      [{ ts_from: 1, ts_to: 2 }, 'ts_from'],
      [{ ts_from: '2026-03-01 00:00:00', ts_to: '2026-03-02 00:00:00', extra: 1 }, 'extra'],
    ];
    for (const [body, problem] of refusals) {
      const res = await start(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject({ result: '400-00002', data: null });
      expect(res.body.message).toContain(problem);
    }
    const notJson = await fetch(`${one.url}${downloads()}`, {
      method: 'POST',
      headers: { authorization: basicAuth(reader), 'content-type': 'application/json' },
      body: '{"ts_from":',
    });
    expect(notJson.status).toBe(400);
    expect((await notJson.json()) as { result: string }).toMatchObject({ result: '400-00002' });

    const nul = await callApi(`${downloads()}?download_id=a%00b`, basicAuth(reader), {
      base: one.url,
    });
    expect(nul.status).toBe(400);
    expect(nul.body).toMatchObject({ result: '400-00002', data: null });

    const unknown = await formDownload('no-such-job', basicAuth(reader));
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ result: '404-40001' });
    expect((await formDownload(`${'x'.repeat(65)}`, basicAuth(reader))).status).toBe(404);
    const unauthenticated = await formDownload('no-such-job', 'Basic bm9ib2R5Om5vdGhpbmc=');
    expect(unauthenticated.status).toBe(401);
    expect(await unauthenticated.json()).toMatchObject({ result: '401-00002' });
    expect((await formDownload('no-such-job', '')).status).toBe(401);

    const withoutRole = await start(
      { ts_from: '2026-01-01 00:00:00', ts_to: '2026-01-02 00:00:00' },
      member,
    );
    expect(withoutRole.status).toBe(403);
    expect(withoutRole.body.result).toBe('403-00001');
    // Another organization's reader is not a user of this one.
    const foreign = await start(
      { ts_from: '2026-01-01 00:00:00', ts_to: '2026-01-02 00:00:00' },
      foreignReader,
    );
    expect(foreign.status).toBe(401);
    const foreignList = await callApi(downloads(), basicAuth(foreignReader), { base: one.url });
    expect(foreignList.status).toBe(401);
  });

  it('records the starts and the downloads, refused ones included', async () => {
    await expect
      .poll(async () => {
        const page = await callApi(
          `/api/${org}/platform/audit-log?action=audit_log.download_request`,
          basicAuth(reader),
          { base: one.url },
        );
        const records = (page.body.data as { records: AuditRecord[] }).records;
        return records.map((r) => [r.actorName, r.outcome]);
      }, EVENTUALLY)
      .toEqual(
        expect.arrayContaining([
          [reader.username, 'success'],
          [reader.username, 'failure'],
          [member.username, 'failure'],
        ]),
      );
    await expect
      .poll(async () => {
        const page = await callApi(
          `/api/${org}/platform/audit-log?action=audit_log.download&actor=${reader.username}`,
          basicAuth(reader),
          { base: two.url },
        );
        const records = (page.body.data as { records: AuditRecord[] }).records;
        return records.map((r) => [r.outcome, r.result, r.credential]);
      }, EVENTUALLY)
      .toEqual(
        expect.arrayContaining([
          ['success', null, null],
          ['failure', '409-40001', null],
        ]),
      );
  });

  it('keeps at most 100 jobs per organization, each for 7 days', async () => {
    // Now, not the helper's fixed day: other files' replicas sweep this table by the real clock.
    const clock = manualClock(Date.now());
    const jobs = createDownloadJobs(testDb(), clock, createLogger('silent'));
    const kept = `retention-${Date.now()}`;
    const range = {
      conditions: { ts_from: '2026-01-01 00:00:00', ts_to: '2026-01-01 00:00:01' },
      fromMs: Date.UTC(2026, 0, 1),
      toMs: Date.UTC(2026, 0, 1, 0, 0, 1),
    };
    const creator = { id: 'someone', name: 'someone' };
    for (let i = 0; i < DOWNLOAD_JOBS_MAX; i++) await jobs.create(own(kept), range, creator);
    await expect(jobs.create(own(kept), range, creator)).rejects.toMatchObject({
      result: '400-40001',
    });
    clock.advance(DOWNLOAD_RETENTION_MS - 1);
    await jobs.sweep();
    expect(await jobs.list(own(kept))).toHaveLength(DOWNLOAD_JOBS_MAX);
    clock.advance(1);
    await jobs.sweep();
    expect(await jobs.list(own(kept))).toEqual([]);
    await jobs.create(own(kept), range, creator);
    await testDb()('audit_download_jobs').where({ org: kept }).del();
  });
});
