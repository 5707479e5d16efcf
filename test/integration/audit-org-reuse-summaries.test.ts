import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import { REFUSALS_RECORDED_PER_WINDOW } from '../../src/audit/refusal-summaries.ts';
import { basicAuth, callApi, type ApiResponse } from '../helpers/api.ts';
import { requestFrom } from '../helpers/from-address.ts';
import { createUser, uniqueId } from '../helpers/keycloak.ts';
import { closeTestDb, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';

const FLOOD = '127.0.0.31';

function expectOk(answer: ApiResponse): unknown {
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.data;
}

/**
 * Refusals of an organization past their window's share wait, counted, for the window's end
 * (a minute) to be recorded as one summary. The organization is deleted and made again under
 * the same id, through the same replica, within that minute: the summary is the deleted
 * organization's, and must be in its part of the log, before the new organization's
 * `organization.create`, not after it where the new organization's readers would see it.
 * Ports 19956-19957.
 */
describe('audit log: refusal summaries of an organization id used again', () => {
  let replica: Replica | undefined;
  let org: string;

  beforeAll(async () => {
    replica = await startReplica(19956);
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  it("writes the deleted organization's open summaries before the new organization begins", async () => {
    const admin = basicAuth(await createUser('master'));
    const call = (path: string, method = 'GET', body?: unknown) =>
      callApi(path, admin, { base: replica!.url, method, body });
    org = uniqueId('resum-');
    expectOk(await call('/api/platform/organizations', 'POST', { id: org, name: 'One' }));
    const flood = REFUSALS_RECORDED_PER_WINDOW + 5;
    for (let i = 0; i < flood; i++) {
      const res = await requestFrom(FLOOD, `${replica!.url}/api/${org}/platform/workspaces`, {
        headers: { authorization: `Bearer ${randomBytes(24).toString('base64url')}` },
      });
      expect(res.status).toBe(401);
    }
    expectOk(await call(`/api/platform/organizations/${org}?confirm=${org}`, 'DELETE'));
    expectOk(await call('/api/platform/organizations', 'POST', { id: org, name: 'Two' }));
    await replica!.gateway.close();
    replica = undefined;

    const log = (await testDb()<AuditRow>('audit_log').where({ org }).orderBy('seq')).map(recordOf);
    const creates = log.filter((r) => r.action === 'organization.create').map((r) => r.seq);
    expect(creates).toHaveLength(2);
    const flooded = log.filter((r) => r.address === FLOOD);
    const counted = flooded.reduce(
      (sum, r) => sum + (r.action === 'api.request' ? 1 : Number(r.details.count)),
      0,
    );
    expect(counted).toBe(flood);
    // Every one of them in the deleted organization's part: before the second create.
    expect(flooded.filter((r) => r.seq > creates[1]!)).toEqual([]);
  });
});
