import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DownloadJob } from '../../src/audit/download-jobs.schemas.ts';
import { accessTokenOf, basicAuth, callApi } from '../helpers/api.ts';
import { grantReaderRole } from '../helpers/audit-readers.ts';
import { dpopKey, postForm } from '../helpers/dpop.ts';
import { createUser, passwordGrantBody, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

const RANGE = { ts_from: '2026-01-01 00:00:00', ts_to: '2026-12-31 23:59:59' };

/**
 * Every route of the audit log's read side, tried by those who must not pass: another
 * organization's reader (Basic and Bearer, at the organization's paths and the administrators'),
 * a user of the organization without the reader role, a reader with another log's job id, and a
 * token bound to a DPoP key sent as Bearer (in the header and in the download's form). None
 * reads, exports, downloads or changes anything. Ports 19888-19889.
 */
describe("audit log: nobody but an organization's readers and platform administrators", () => {
  let replica: Replica;
  let orgA: string;
  let orgB: string;
  let readerA: TestUser;
  let readerB: TestUser;
  let memberB: TestUser;
  let admin: string;
  let jobB: string;
  let adminJobB: string;

  const call = (path: string, authorization: string, method = 'GET', body?: unknown) =>
    callApi(path, authorization, { base: replica.url, method, body });

  /** B's routes as its readers call them, and as platform administrators do. */
  const ownRoutes = (): [string, string, unknown?][] => [
    ['GET', `/api/${orgB}/platform/audit-log`],
    ['GET', `/api/${orgB}/platform/audit-log/export`],
    ['GET', `/api/${orgB}/platform/audit-log/retention`],
    ['PUT', `/api/${orgB}/platform/audit-log/retention`, { days: 400 }],
    ['POST', `/api/${orgB}/platform/auditlog/download`, RANGE],
    ['GET', `/api/${orgB}/platform/auditlog/download`],
    ['POST', `/api/${orgB}/platform/auditlog/download/${jobB}`],
  ];
  const administratorsRoutes = (): [string, string, unknown?][] => [
    ['GET', `/api/platform/audit-log`],
    ['GET', `/api/platform/audit-log/export`],
    ['GET', `/api/platform/organizations/${orgB}/audit-log`],
    ['GET', `/api/platform/organizations/${orgB}/audit-log/export`],
    ['PUT', `/api/platform/organizations/${orgB}/audit-log/retention`, { days: 400 }],
    ['POST', `/api/platform/organizations/${orgB}/auditlog/download`, RANGE],
    ['GET', `/api/platform/organizations/${orgB}/auditlog/download`],
    ['POST', `/api/platform/organizations/${orgB}/auditlog/download/${adminJobB}`],
  ];

  const jobsOfB = async (authorization: string, base = `/api/${orgB}/platform`) =>
    (await call(`${base}/auditlog/download`, authorization)).body.data as DownloadJob[];

  beforeAll(async () => {
    replica = await startReplica(19888);
    [orgA, orgB] = await Promise.all([createOrganization(['ws1']), createOrganization(['ws1'])]);
    [readerA, readerB, memberB] = await Promise.all([
      createUser(orgA, { workspaceRoles: ['ws1'] }),
      createUser(orgB, { workspaceRoles: ['ws1'] }),
      createUser(orgB, { workspaceRoles: ['ws1'] }),
    ]);
    await Promise.all([grantReaderRole(readerA), grantReaderRole(readerB)]);
    admin = basicAuth(await createUser('master'));
    const started = await call(
      `/api/${orgB}/platform/auditlog/download`,
      basicAuth(readerB),
      'POST',
      RANGE,
    );
    jobB = (started.body.data as { download_id: string }).download_id;
    const byAdmin = await call(
      `/api/platform/organizations/${orgB}/auditlog/download`,
      admin,
      'POST',
      RANGE,
    );
    adminJobB = (byAdmin.body.data as { download_id: string }).download_id;
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  it("refuses another organization's reader on every route of B's log, by Basic and by Bearer", async () => {
    const bearerA = `Bearer ${await accessTokenOf(readerA)}`;
    for (const authorization of [basicAuth(readerA), bearerA]) {
      for (const [method, path, body] of [...ownRoutes(), ...administratorsRoutes()]) {
        const res = await call(path, authorization, method, body);
        expect(res.status, `${method} ${path}`).toBe(401);
        expect(res.body).toMatchObject({ result: '401-00002', data: null });
      }
    }
    // Nothing of theirs was made or changed in B.
    expect((await jobsOfB(basicAuth(readerB))).map((job) => job.download_id)).toEqual([jobB]);
    const retention = await call(`/api/${orgB}/platform/audit-log/retention`, basicAuth(readerB));
    expect(retention.body.data).toMatchObject({ chosen: false });
  });

  it('refuses a user of the organization without the reader role on every route (403)', async () => {
    for (const [method, path, body] of ownRoutes()) {
      const res = await call(path, basicAuth(memberB), method, body);
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body).toMatchObject({ result: '403-00001', data: null });
    }
  });

  it("answers a reader another log's job id as no job (404), listed nowhere", async () => {
    for (const [at, id] of [
      [`/api/${orgA}/platform/auditlog/download`, jobB],
      [`/api/${orgB}/platform/auditlog/download`, adminJobB],
    ] as const) {
      const reader = at.includes(orgA) ? readerA : readerB;
      const zip = await call(`${at}/${id}`, basicAuth(reader), 'POST');
      expect(zip.status, at).toBe(404);
      expect(zip.body).toMatchObject({ result: '404-40001', data: null });
      expect((await call(`${at}?download_id=${id}`, basicAuth(reader))).body.data).toEqual([]);
    }
  });

  it('refuses a token bound to a DPoP key sent as Bearer, in the header and in the form', async () => {
    const key = await dpopKey();
    const grant = await postForm(
      replica.url,
      `${testEnv().publicUrl}/auth/realms/${orgB}/protocol/openid-connect/token`,
      passwordGrantBody(readerB),
      key,
    );
    expect(grant.json.token_type).toBe('DPoP');
    const bound = `Bearer ${String(grant.json.access_token)}`;
    for (const [method, path, body] of ownRoutes()) {
      expect((await call(path, bound, method, body)).status, `${method} ${path}`).toBe(401);
    }
    const form = await fetch(`${replica.url}/api/${orgB}/platform/auditlog/download/${jobB}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ authorization: bound }).toString(),
    });
    expect(form.status).toBe(401);
    expect(form.headers.get('content-type')).toMatch(/^application\/json/);
  });
});
