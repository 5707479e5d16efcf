import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createChainFollower, type AuditRecord } from '../../src/audit/audit-chain.ts';
import type { DownloadJob } from '../../src/audit/download-jobs.schemas.ts';
import { basicAuth, callApi, type ApiResponse } from '../helpers/api.ts';
import { grantReaderRole } from '../helpers/audit-readers.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, uniqueId, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { readZip } from '../helpers/zip-reader.ts';

/** The records of a JSON Lines export, without its keys and checkpoints. */
const recordsOf = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as AuditRecord & { type?: string })
    .filter((line) => line.type === undefined);

function expectOk(answer: ApiResponse): unknown {
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.data;
}

/**
 * An organization deleted and made again under the same id: the new organization's readers see
 * its log from its creation on, never the deleted one's records (pages, exports, download
 * jobs, retention); platform administrators still read the whole log, which still verifies.
 * Ports 19880-19881.
 */
describe('audit log: an organization id used again', () => {
  let gateway: Replica;
  let admin: string;
  let org: string;
  let oldReader: TestUser;
  let newReader: TestUser;

  const reader = (user: TestUser) => basicAuth(user);
  const page = async (auth: string, path: string) =>
    (expectOk(await callApi(path, auth, { base: gateway.url })) as { records: AuditRecord[] })
      .records;
  /**
   * Makes the organization `org`, named `name`, and its audit reader `shared-name`: the first
   * organization and the one made again under its id each get one (another tenant, perhaps with
   * the same user names).
   */
  const organizationWithReader = async (name: string): Promise<TestUser> => {
    expectOk(
      await callApi('/api/platform/organizations', admin, {
        base: gateway.url,
        method: 'POST',
        body: { id: org, name },
      }),
    );
    const user = await createUser(org, { username: 'shared-name' });
    await grantReaderRole(user);
    return user;
  };

  beforeAll(async () => {
    gateway = await startReplica(19880);
    admin = basicAuth(await createUser('master'));
    org = uniqueId('reuse-');
    oldReader = await organizationWithReader('First');
    // The first organization's history: reads, a retention of its own, a download job.
    const before = await page(reader(oldReader), `/api/${org}/platform/audit-log`);
    expect(before).toBeDefined();
    expectOk(
      await callApi(`/api/${org}/platform/audit-log/retention`, reader(oldReader), {
        base: gateway.url,
        method: 'PUT',
        body: { days: 120 },
      }),
    );
    expectOk(
      await callApi(`/api/${org}/platform/auditlog/download`, reader(oldReader), {
        base: gateway.url,
        method: 'POST',
        body: { ts_from: '2020-01-01 00:00:00', ts_to: '2020-01-02 00:00:00' },
      }),
    );
    await vi.waitFor(async () => {
      const mine = await page(
        reader(oldReader),
        `/api/${org}/platform/audit-log?actor=shared-name`,
      );
      expect(mine.length).toBeGreaterThanOrEqual(2);
    }, EVENTUALLY);

    expectOk(
      await callApi(`/api/platform/organizations/${org}?confirm=${org}`, admin, {
        base: gateway.url,
        method: 'DELETE',
      }),
    );
    // The delete's own record belongs to the first organization: written (with its copy in
    // master's log, by the same writer) before the new one is made.
    await vi.waitFor(async () => {
      const deletes = await page(admin, '/api/platform/audit-log?action=organization.delete');
      expect(deletes.some((r) => r.details.organization === org)).toBe(true);
    }, EVENTUALLY);
    newReader = await organizationWithReader('Second');
  });

  afterAll(async () => {
    await gateway?.gateway.close();
    await closeTestDb();
  });

  it("shows the new organization's readers none of the deleted one's records", async () => {
    await expect
      .poll(
        async () =>
          (await page(admin, `/api/platform/organizations/${org}/audit-log?order=asc`)).filter(
            (r) => r.action === 'organization.create',
          ).length,
        EVENTUALLY,
      )
      .toBe(2);
    const everything = await page(
      admin,
      `/api/platform/organizations/${org}/audit-log?order=asc&limit=1000`,
    );
    const recreatedAt = everything.filter((r) => r.action === 'organization.create')[1]!.seq;
    const theirs = await page(
      reader(newReader),
      `/api/${org}/platform/audit-log?order=asc&limit=1000`,
    );
    expect(theirs.length).toBeGreaterThan(0);
    expect(theirs.every((r) => r.seq >= recreatedAt)).toBe(true);
    expect(theirs.some((r) => r.action === 'organization.delete')).toBe(false);
    expect(theirs.some((r) => r.action === 'audit_log.retention.change')).toBe(false);

    const exported = await fetch(`${gateway.url}/api/${org}/platform/audit-log/export`, {
      headers: { authorization: reader(newReader) },
    });
    expect(exported.status).toBe(200);
    const lines = recordsOf(await exported.text());
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.every((r) => r.seq >= recreatedAt)).toBe(true);
    const follower = createChainFollower();
    for (const record of lines) expect(follower.next(record)).toBeUndefined();
    for (const format of ['csv', 'ocsf']) {
      const other = await fetch(
        `${gateway.url}/api/${org}/platform/audit-log/export?format=${format}`,
        { headers: { authorization: reader(newReader) } },
      );
      expect(await other.text()).not.toContain('audit_log.retention.change');
    }

    // The administrators' view is the whole log, one chain.
    const whole = await fetch(`${gateway.url}/api/platform/organizations/${org}/audit-log/export`, {
      headers: { authorization: admin },
    });
    const all = recordsOf(await whole.text());
    expect(all[0]!.seq).toBe(1);
    const chain = createChainFollower();
    for (const record of all) expect(chain.next(record)).toBeUndefined();
    expect(all.some((r) => r.action === 'audit_log.retention.change')).toBe(true);
  });

  it("keeps the deleted organization's download jobs and retention from the new one", async () => {
    const jobs = expectOk(
      await callApi(`/api/${org}/platform/auditlog/download`, reader(newReader), {
        base: gateway.url,
      }),
    ) as DownloadJob[];
    expect(jobs).toEqual([]);
    const retention = expectOk(
      await callApi(`/api/${org}/platform/audit-log/retention`, reader(newReader), {
        base: gateway.url,
      }),
    );
    expect(retention).toMatchObject({ chosen: false });

    // A job of the new organization over all time holds its records only.
    const started = expectOk(
      await callApi(`/api/${org}/platform/auditlog/download`, reader(newReader), {
        base: gateway.url,
        method: 'POST',
        body: { ts_from: '2026-01-01 00:00:00', ts_to: '2026-12-31 23:59:59' },
      }),
    ) as { download_id: string };
    let job: DownloadJob | undefined;
    await expect
      .poll(async () => {
        [job] = expectOk(
          await callApi(
            `/api/${org}/platform/auditlog/download?download_id=${started.download_id}`,
            reader(newReader),
            { base: gateway.url },
          ),
        ) as DownloadJob[];
        return job?.status;
      }, EVENTUALLY)
      .toBe('Completion');
    const zip = await fetch(
      `${gateway.url}/api/${org}/platform/auditlog/download/${started.download_id}`,
      { method: 'POST', headers: { authorization: reader(newReader) } },
    );
    expect(zip.status).toBe(200);
    const records = recordsOf(readZip(Buffer.from(await zip.arrayBuffer()))[0]!.content.toString());
    expect(records.length).toBe(job!.count_export);
    expect(records.some((r) => r.action === 'organization.delete')).toBe(false);
    expect(records.some((r) => r.action === 'audit_log.retention.change')).toBe(false);
  });

  it("lets a platform administrator download the whole log as a job, the deleted organization's records included", async () => {
    const path = `/api/platform/organizations/${org}/auditlog/download`;
    const started = expectOk(
      await callApi(path, admin, {
        base: gateway.url,
        method: 'POST',
        body: { ts_from: '2026-01-01 00:00:00', ts_to: '2026-12-31 23:59:59' },
      }),
    ) as { download_id: string };
    let job: DownloadJob | undefined;
    await expect
      .poll(async () => {
        [job] = expectOk(
          await callApi(`${path}?download_id=${started.download_id}`, admin, {
            base: gateway.url,
          }),
        ) as DownloadJob[];
        return job?.status;
      }, EVENTUALLY)
      .toBe('Completion');
    const zip = await fetch(`${gateway.url}${path}/${started.download_id}`, {
      method: 'POST',
      headers: { authorization: admin },
    });
    expect(zip.status).toBe(200);
    const records = recordsOf(readZip(Buffer.from(await zip.arrayBuffer()))[0]!.content.toString());
    expect(records.length).toBe(job!.count_export);
    expect(records[0]!.seq).toBe(1);
    const chain = createChainFollower();
    for (const record of records) expect(chain.next(record)).toBeUndefined();
    expect(records.some((r) => r.action === 'organization.delete')).toBe(true);
    expect(records.some((r) => r.action === 'audit_log.retention.change')).toBe(true);

    // Apart from the organization's readers' jobs: neither lists nor serves the other's.
    const theirs = expectOk(
      await callApi(`/api/${org}/platform/auditlog/download`, reader(newReader), {
        base: gateway.url,
      }),
    ) as DownloadJob[];
    expect(theirs.map((j) => j.download_id)).not.toContain(started.download_id);
    const crossed = await fetch(
      `${gateway.url}/api/${org}/platform/auditlog/download/${started.download_id}`,
      { method: 'POST', headers: { authorization: reader(newReader) } },
    );
    expect(crossed.status).toBe(404);
  });

  it("lets a platform administrator change the deleted organization's retention, apart from the new one's", async () => {
    const path = `/api/platform/organizations/${org}/audit-log/retention`;
    const before = expectOk(await callApi(path, admin, { base: gateway.url })) as {
      chosen: boolean;
      deleted?: { from: number; until: number; days: number; chosen: boolean }[];
    };
    expect(before.chosen).toBe(false);
    expect(before.deleted).toEqual([expect.objectContaining({ from: 1, days: 120, chosen: true })]);
    const changed = expectOk(
      await callApi(path, admin, {
        base: gateway.url,
        method: 'PUT',
        body: { days: 400, from: 1 },
      }),
    );
    expect(changed).toMatchObject({
      chosen: false,
      deleted: [expect.objectContaining({ from: 1, days: 400, chosen: true })],
    });
    const nowhere = await callApi(path, admin, {
      base: gateway.url,
      method: 'PUT',
      body: { days: 400, from: before.deleted![0]!.until + 1 },
    });
    expect(nowhere.status).toBe(400);
    // The new organization's readers neither see nor set the deleted one's.
    const own = `/api/${org}/platform/audit-log/retention`;
    const theirs = expectOk(await callApi(own, reader(newReader), { base: gateway.url }));
    expect(theirs).not.toHaveProperty('deleted');
    const refused = await callApi(own, reader(newReader), {
      base: gateway.url,
      method: 'PUT',
      body: { days: 400, from: 1 },
    });
    expect(refused.status).toBe(400);
  });
});
