import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBatchAppender } from '../../src/audit/audit-batch.ts';
import { verifyChain, type AuditRecord } from '../../src/audit/audit-chain.ts';
import { createExportVerifier } from '../../src/audit/export-verifier.ts';
import { verifyExport } from '../../src/cli/audit-commands.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import { apiEvent } from '../helpers/audit-records.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { grantReaderRole } from '../helpers/audit-readers.ts';
import { writeRequests } from '../helpers/audit-writes.ts';
import { MASTER_REALM } from '../../src/tenancy/identifiers.ts';
import { createUser, keycloakAdmin, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';

/**
 * Reading the audit log: who may (an organization's users with its reader role, platform
 * administrators), the filters, keyset pages with a total (newest first, or oldest first), streamed exports (JSON Lines that
 * verify offline, CSV), a 100,000-record export in bounded memory, and every read recorded.
 * Ports 19810/19811.
 */
describe('audit log: reading and exporting', () => {
  let replica: Replica;
  let org: string;
  let reader: TestUser;
  let member: TestUser;
  let admin: TestUser;
  let otherAdmin: TestUser;

  beforeAll(async () => {
    replica = await startReplica(19810);
    org = await createOrganization(['ws1']);
    const other = await createOrganization(['ws1']);
    [reader, member, admin, otherAdmin] = await Promise.all([
      createUser(org, { workspaceRoles: ['ws1'] }),
      createUser(org, { workspaceRoles: ['ws1'] }),
      createUser('master'),
      createUser(other, { workspaceRoles: ['ws1'] }),
    ]);
    await grantReaderRole(reader);
    await grantReaderRole(otherAdmin);
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  const get = (path: string, user: TestUser) =>
    callApi(path, basicAuth(user), { base: replica.url });
  const orgLog = (query = '') => `/api/${org}/platform/audit-log${query}`;

  interface Page {
    records: AuditRecord[];
    total: number;
    next: number | null;
  }

  /** Waits until the organization's log holds `count` records matching `query`. */
  async function pageOnceWritten(query: string, count: number): Promise<Page> {
    let page: Page | undefined;
    await expect
      .poll(async () => {
        page = (await get(orgLog(query), reader)).body.data as Page;
        return page.total;
      }, EVENTUALLY)
      .toBeGreaterThanOrEqual(count);
    return page!;
  }

  it("lets the organization's readers read its log: filters, pages after pages, the total", async () => {
    const from = new Date().toISOString();
    for (let i = 0; i < 5; i++) {
      expect((await get(`/api/${org}/platform/workspaces`, member)).status).toBe(200);
    }
    expect(
      (
        await callApi(`/api/${org}/platform/workspaces`, 'Basic bm9ib2R5Om5vdGhpbmc=', {
          base: replica.url,
        })
      ).status,
    ).toBe(401);
    const actor = `actor=${member.username}&from=${encodeURIComponent(from)}`;
    const all = await pageOnceWritten(`?${actor}`, 5);
    expect(all.records.every((r) => r.actorName === member.username)).toBe(true);

    const first = (await get(orgLog(`?${actor}&limit=2`), reader)).body.data as Page;
    expect(first).toMatchObject({ total: 5, next: first.records[1]!.seq });
    const second = (await get(orgLog(`?${actor}&limit=2&after=${first.next}`), reader)).body
      .data as Page;
    const third = (await get(orgLog(`?${actor}&limit=2&after=${second.next}`), reader)).body
      .data as Page;
    expect(third.next).toBeNull();
    const newestFirst = all.records.map((r) => r.seq);
    expect(newestFirst).toEqual([...newestFirst].sort((a, b) => b - a));
    expect([...first.records, ...second.records, ...third.records].map((r) => r.seq)).toEqual(
      newestFirst,
    );
    // Oldest first, the same keyset walk the other way: the same records, reversed.
    const ascending: number[] = [];
    let after: number | null | undefined;
    do {
      const cursor = after === undefined ? '' : `&after=${after}`;
      const page = (await get(orgLog(`?${actor}&order=asc&limit=2${cursor}`), reader)).body
        .data as Page;
      expect(page.total).toBe(5);
      ascending.push(...page.records.map((r) => r.seq));
      after = page.next;
    } while (after !== null);
    expect(ascending).toEqual([...newestFirst].reverse());
    expect((await get(orgLog('?order=sideways'), reader)).status).toBe(400);

    const refused = await pageOnceWritten(
      `?outcome=failure&credential=basic&action=api.*&from=${encodeURIComponent(from)}`,
      1,
    );
    expect(refused.records.map((r) => [r.actorName, r.reason])).toContainEqual([
      'nobody',
      'wrong_password',
    ]);
    expect(
      (
        await get(
          orgLog(`?to=${encodeURIComponent(from)}&from=${encodeURIComponent(from)}`),
          reader,
        )
      ).body.data,
    ).toMatchObject({ total: 0, records: [] });
    expect((await get(orgLog('?limit=0'), reader)).status).toBe(400);
    expect((await get(orgLog('?credential=kerberos'), reader)).status).toBe(400);
    // PostgreSQL text holds no NUL: such a filter is a bad request, not a failed query.
    for (const filter of ['actor=a%00b', 'action=user%00.*', 'workspace=%00']) {
      for (const route of ['', '/export']) {
        const res = await get(orgLog(`${route}?${filter}`), reader);
        expect(res.status, `${route}?${filter}`).toBe(400);
        expect(res.body).toMatchObject({ result: '400-00002', data: null });
      }
    }
  });

  it('refuses a member without the role (403) and another organization with its own reader, and records both attempts', async () => {
    const denied = await get(orgLog(), member);
    expect(denied.status).toBe(403);
    expect(denied.body.result).toBe('403-00001');
    const foreign = await get(orgLog(), otherAdmin);
    expect(foreign.status).toBe(401);
    // By this member: the log may hold other refused reads, written before or after.
    const attempts = await pageOnceWritten(
      `?outcome=failure&action=audit_log.read&actor=${member.username}`,
      1,
    );
    expect(attempts.records[0]).toMatchObject({
      actorName: member.username,
      result: '403-00001',
    });
    const refusedCalls = await pageOnceWritten(`?outcome=failure&actor=${otherAdmin.username}`, 1);
    expect(refusedCalls.records[0]).toMatchObject({
      action: 'api.request',
      route: '/api/{organization_id}/platform/audit-log',
      status: 401,
    });
  });

  it("lets platform administrators read an organization's log and master's; both reads recorded", async () => {
    const read = await get(`/api/platform/organizations/${org}/audit-log?limit=1`, admin);
    expect(read.status).toBe(200);
    expect(
      (await get(`/api/platform/organizations/nosuch${Date.now()}/audit-log`, admin)).status,
    ).toBe(404);
    const master = await get('/api/platform/audit-log?action=audit_log.read', admin);
    expect(master.status).toBe(200);
    await pageOnceWritten(`?action=audit_log.read&actor=${admin.username}`, 1);
    await expect
      .poll(async () => {
        const page = (
          await get(`/api/platform/audit-log?action=audit_log.read&actor=${admin.username}`, admin)
        ).body.data as Page;
        return page.records.filter((r) => r.details.organization === org).length;
      }, EVENTUALLY)
      .toBeGreaterThanOrEqual(1);
  });

  it('puts what a platform administrator changes in an organization in both logs', async () => {
    const created = await callApi(
      `/api/platform/organizations/${org}/workspaces`,
      basicAuth(admin),
      {
        base: replica.url,
        method: 'POST',
        body: { id: 'ws9', name: 'Nine' },
      },
    );
    expect(created.status).toBe(200);
    const inOrg = await pageOnceWritten(`?action=workspace.*&actor=${admin.username}`, 1);
    expect(inOrg.records[0]).toMatchObject({
      action: 'workspace.create',
      outcome: 'success',
      actorRealm: 'master',
      details: { organization: org, id: 'ws9' },
    });
    // Its own batch, perhaps a later one; and this administrator's records only: master's log
    // holds every suite's changes.
    await expect
      .poll(async () => {
        const inMaster = (
          await get(
            `/api/platform/audit-log?action=workspace.create&actor=${admin.username}`,
            admin,
          )
        ).body.data as Page;
        return inMaster.records.some((r) => r.details.organization === org);
      }, EVENTUALLY)
      .toBe(true);
  });

  it('puts a platform-wide change in the log of each organization it changed, naming it alone', async () => {
    // The organization's brute-force detection off, as in a realm from before it was shipped.
    const keycloak = await keycloakAdmin();
    await keycloak.realms.update({ realm: org }, { bruteForceProtected: false });
    const applied = await callApi('/api/platform/brute-force-detection', basicAuth(admin), {
      base: replica.url,
      method: 'POST',
    });
    expect(applied.status).toBe(200);
    expect(applied.body.data).toContainEqual({ realm: org, changed: true });
    const inOrg = await pageOnceWritten(
      `?action=brute_force_detection.apply&actor=${admin.username}`,
      1,
    );
    expect(inOrg.records[0]).toMatchObject({
      outcome: 'success',
      actorRealm: 'master',
      details: { realm: org },
    });
    await expect
      .poll(async () => {
        const inMaster = (
          await get(
            `/api/platform/audit-log?action=brute_force_detection.apply&actor=${admin.username}`,
            admin,
          )
        ).body.data as Page;
        return inMaster.records[0]?.details.realms;
      }, EVENTUALLY)
      .toContain(org);
  });

  it('exports JSON Lines that verify offline and CSV, streamed; the export is recorded', async () => {
    const res = await fetch(`${replica.url}${orgLog('/export')}`, {
      headers: { authorization: basicAuth(reader) },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-ndjson');
    const lines = (await res.text())
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as AuditRecord & { type?: string });
    // The keys first; records and checkpoints after (audit-checkpoints.test.ts verifies them).
    expect(lines[0]!.type).toBe('keys');
    const records = lines.filter((line) => line.type === undefined);
    expect(records[0]!.seq).toBe(1);
    expect(verifyChain(records)).toBeUndefined();

    const csv = await fetch(`${replica.url}${orgLog('/export?format=csv&outcome=failure')}`, {
      headers: { authorization: basicAuth(reader) },
    });
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    const rows = (await csv.text()).split('\r\n').filter(Boolean);
    expect(rows[0]).toMatch(/^org,seq,at,action,outcome,/);
    expect(rows.slice(1).every((row) => row.includes(',failure,'))).toBe(true);
    const ocsf = await fetch(`${replica.url}${orgLog('/export?format=ocsf&action=api.request')}`, {
      headers: { authorization: basicAuth(reader) },
    });
    const events = (await ocsf.text())
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { class_uid: number; metadata: { tenant_uid: string } });
    expect(events.length).toBeGreaterThan(0);
    expect(events.every((e) => e.class_uid === 3002 && e.metadata.tenant_uid === org)).toBe(true);
    await pageOnceWritten(`?action=audit_log.export&actor=${reader.username}`, 2);
  });

  it('a time-range export of a log two replicas wrote, their batches interleaved in time, verifies', async () => {
    const log = await createOrganization([]);
    // Each replica's batch is in its own time order; the second is chained after the first.
    const t = Date.UTC(2026, 0, 15, 12);
    const appender = createBatchAppender(testDb());
    const batch = (times: number[]) =>
      appender.append(
        times.map((ms) => apiEvent(log, ms)),
        undefined,
        () => undefined,
      );
    await batch([t - 500, t + 100, t + 1100]);
    await batch([t - 200, t + 300, t + 1300]);
    const range = `from=${new Date(t).toISOString()}&to=${new Date(t + 1000).toISOString()}`;
    const page = (await get(`/api/platform/organizations/${log}/audit-log?${range}`, admin)).body
      .data as Page;
    expect(page.records.map((r) => r.seq)).toEqual([5, 2]);

    const res = await fetch(
      `${replica.url}/api/platform/organizations/${log}/audit-log/export?${range}`,
      { headers: { authorization: basicAuth(admin) } },
    );
    expect(res.status).toBe(200);
    const file = path.join(os.tmpdir(), `realmgate-audit-${randomBytes(4).toString('hex')}.jsonl`);
    await writeFile(file, await res.text());
    // Every record of the range, and those written between them whatever their time: no gap.
    await expect(verifyExport(file)).resolves.toMatchObject({
      org: log,
      records: 4,
      firstSeq: 2,
      lastSeq: 5,
    });
    await rm(file);
  });

  it('a record edited or removed in the database fails the verification of an export at that record', async () => {
    const exportFile = async () => {
      const res = await fetch(`${replica.url}${orgLog('/export')}`, {
        headers: { authorization: basicAuth(reader) },
      });
      const file = path.join(
        os.tmpdir(),
        `realmgate-audit-${randomBytes(4).toString('hex')}.jsonl`,
      );
      await writeFile(file, await res.text());
      return file;
    };
    const clean = await exportFile();
    expect(await verifyExport(clean)).toMatchObject({ org, firstSeq: 1 });
    await testDb()('audit_log').where({ org, seq: 3 }).update({ actor_name: 'mallory' });
    const edited = await exportFile();
    await expect(verifyExport(edited)).rejects.toThrow(
      /^record 3 \(line \d+\) does not fit: its hash does not match its content/,
    );
    await testDb()('audit_log').where({ org, seq: 3 }).del();
    const removed = await exportFile();
    await expect(verifyExport(removed)).rejects.toThrow(/^record 4 \(line \d+\) does not fit/);
    await Promise.all([clean, edited, removed].map((file) => rm(file)));
  });

  it('records an export its client hung up on as cut, in its request record as in its own', async () => {
    const big = await createOrganization([]);
    // Far more than the sockets' buffers: the client leaves while the gateway still writes.
    await writeRequests(big, 20_000);
    const requestId = `cut-${randomBytes(6).toString('hex')}`;
    const leaving = new AbortController();
    const res = await fetch(
      `${replica.url}/api/platform/organizations/${big}/audit-log/export?format=csv`,
      {
        headers: { authorization: basicAuth(admin), 'x-request-id': requestId },
        signal: leaving.signal,
      },
    );
    expect(res.status).toBe(200);
    await res.body!.getReader().read();
    leaving.abort();

    const recorded = () =>
      testDb()('audit_log')
        .where({ org: MASTER_REALM, request_id: requestId })
        .orderBy('action')
        .select('action', 'outcome', 'status', 'result', 'reason');
    await expect.poll(async () => (await recorded()).length, EVENTUALLY).toBe(2);
    // The client holds part of a file that may look whole: no success, in either record.
    expect(await recorded()).toEqual([
      {
        action: 'api.request',
        outcome: 'failure',
        status: 200,
        result: null,
        reason: 'answer_cut',
      },
      {
        action: 'audit_log.export',
        outcome: 'failure',
        status: null,
        result: null,
        reason: 'answer_cut',
      },
    ]);
  });

  it('streams an export of 100,000 records in bounded memory', async () => {
    const big = await createOrganization([]);
    await writeRequests(big, 100_000);

    const res = await fetch(`${replica.url}/api/platform/organizations/${big}/audit-log/export`, {
      headers: { authorization: basicAuth(admin) },
    });
    expect(res.status).toBe(200);
    // What stays reachable, not what waits for the collector: measured after a collection.
    setFlagsFromString('--expose-gc');
    const collect = runInNewContext('gc') as () => void;
    collect();
    const baseline = process.memoryUsage().heapUsed;
    let peak = 0;
    let bytes = 0;
    let count = 0;
    let rest = '';
    // The whole file is checked as `audit verify` does: chain, and checkpoints with their keys.
    const verifier = createExportVerifier();
    let line = 0;
    const decoder = new TextDecoder();
    for await (const chunk of res.body! as AsyncIterable<Uint8Array>) {
      bytes += chunk.byteLength;
      const lines = (rest + decoder.decode(chunk, { stream: true })).split('\n');
      rest = lines.pop()!;
      for (const text of lines) {
        const value = JSON.parse(text) as { type?: string };
        await verifier.line(value, ++line);
        if (value.type !== undefined) continue;
        count++;
        if (count % 5000 === 0) {
          collect();
          peak = Math.max(peak, process.memoryUsage().heapUsed - baseline);
        }
      }
    }
    expect(count).toBe(100_000);
    expect(verifier.finish()).toMatchObject({ records: 100_000, anchored: true });
    // The gateway runs in this process: what it holds while streaming is a small, fixed part of
    // the export (a thousand records read at once), not the export.
    expect(bytes).toBeGreaterThan(50 * 1024 * 1024);
    expect(peak).toBeLessThan(16 * 1024 * 1024);
  }, 240_000);
});
