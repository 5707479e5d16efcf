import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../src/audit/audit-chain.ts';
import { basicAuth, callApi, type ApiResponse } from '../helpers/api.ts';
import { grantReaderRole } from '../helpers/audit-readers.ts';
import { createUser, uniqueId, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';

function expectOk(answer: ApiResponse): unknown {
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.data;
}

/**
 * An organization deleted and made again at once, through one replica, while the deleted
 * organization's last records (its readers' reads, the delete itself) are still in that
 * replica's spool: they are the deleted organization's, and its successor's readers must not
 * see them. The replica writes its spool only at its shutdown (a minute apart otherwise), so
 * nothing of the first organization is in the database when the second is made.
 * Ports 19884-19887.
 */
describe('audit log: an organization id used again before its records are written', () => {
  let spooling: Replica | undefined;
  let reading: Replica;
  let admin: string;
  let org: string;
  let oldReader: TestUser;
  let newReader: TestUser;

  const call = (replica: Replica, path: string, auth: string, method = 'GET', body?: unknown) =>
    callApi(path, auth, { base: replica.url, method, body });

  beforeAll(async () => {
    spooling = await startReplica(19884, { AUDIT_FLUSH_INTERVAL_MS: '60000' });
    admin = basicAuth(await createUser('master'));
    org = uniqueId('respool-');
    expectOk(
      await call(spooling, '/api/platform/organizations', admin, 'POST', { id: org, name: 'One' }),
    );
    oldReader = await createUser(org);
    await grantReaderRole(oldReader);
    expectOk(await call(spooling, `/api/${org}/platform/audit-log`, basicAuth(oldReader)));
    expectOk(
      await call(spooling, `/api/platform/organizations/${org}?confirm=${org}`, admin, 'DELETE'),
    );
    expectOk(
      await call(spooling, '/api/platform/organizations', admin, 'POST', { id: org, name: 'Two' }),
    );
    // Its shutdown writes what it spooled, the first organization's records included.
    await spooling.gateway.close();
    spooling = undefined;
    reading = await startReplica(19886);
    newReader = await createUser(org);
    await grantReaderRole(newReader);
  });

  afterAll(async () => {
    await Promise.all([spooling?.gateway.close(), reading?.gateway.close()]);
    await closeTestDb();
  });

  it("shows the new organization's readers none of the records the deleted one left spooled", async () => {
    const whole = expectOk(
      await call(
        reading,
        `/api/platform/organizations/${org}/audit-log?order=asc&limit=1000`,
        admin,
      ),
    ) as { records: AuditRecord[] };
    // The administrators' whole log holds both organizations' records.
    expect(whole.records.filter((r) => r.action === 'organization.create')).toHaveLength(2);
    expect(whole.records.some((r) => r.actorName === oldReader.username)).toBe(true);

    const theirs = expectOk(
      await call(
        reading,
        `/api/${org}/platform/audit-log?order=asc&limit=1000`,
        basicAuth(newReader),
      ),
    ) as { records: AuditRecord[] };
    expect(theirs.records.map((r) => [r.action, r.actorName])).not.toContainEqual([
      'audit_log.read',
      oldReader.username,
    ]);
    expect(theirs.records.some((r) => r.action === 'organization.delete')).toBe(false);
    expect(theirs.records.filter((r) => r.action === 'organization.create')).toHaveLength(1);
  });
});
