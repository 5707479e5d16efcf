import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AuditRecord } from '../../src/audit/audit-chain.ts';
import { INCARNATIONS } from '../../src/audit/audit-log.repo.ts';
import { basicAuth, callApi, type ApiResponse } from '../helpers/api.ts';
import { grantReaderRole } from '../helpers/audit-readers.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { createUser, uniqueId } from '../helpers/keycloak.ts';
import { closeTestDb, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/** The late replica's KEYCLOAK_TIMEOUT_MS: the longest hold, within the test's own timeout. */
const HOLD_BOUND = '60000';

function expectOk(answer: ApiResponse): unknown {
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.data;
}

/**
 * The same organization created twice at once, on two replicas (the audit log on, the real
 * Keycloak and database): the call that finds it made meanwhile answers it as made and begins
 * no new period of its audit log, so its readers keep what they read, and its retention choice.
 * The race is made certain by a front that holds the late call's first Keycloak answer until
 * the early call is done and its records are written. Ports 19920-19923.
 *
 * The late replica waits for that answer longer than the hold can last: the hold spans the
 * early call's realm creation, a user, a role and the wait for the records, which on a loaded
 * machine took over 10 s, past the default KEYCLOAK_TIMEOUT_MS (5 s). The late call then gave
 * up on Keycloak and answered 504 instead of finding the organization made.
 */
describe('audit log: an organization created twice at once', () => {
  let front: KeycloakFront;
  let early: Replica;
  let late: Replica;

  beforeAll(async () => {
    front = await startKeycloakFront(testEnv().keycloakUrl);
    early = await startReplica(19920);
    late = await startReplica(19922, { KEYCLOAK_URL: front.url, KEYCLOAK_TIMEOUT_MS: HOLD_BOUND });
  });
  afterAll(async () => {
    await late?.gateway.close();
    await early?.gateway.close();
    await front?.close();
    await closeTestDb();
  });

  it('begins one audit period, not one per call', async () => {
    const admin = basicAuth(await createUser('master'));
    const org = uniqueId('twice-');
    const create = (replica: Replica) =>
      callApi('/api/platform/organizations', admin, {
        base: replica.url,
        method: 'POST',
        body: { id: org, name: 'Twice' },
      });

    // The late call has found no record, and asks Keycloak whether the realm exists.
    const lookup = front.gate(new RegExp(`/admin/realms/${org}$`));
    const lateCall = create(late);
    await lookup.reached;
    expectOk(await create(early));
    const reader = await createUser(org);
    await grantReaderRole(reader);
    expectOk(
      await callApi(`/api/${org}/platform/audit-log/retention`, basicAuth(reader), {
        base: early.url,
        method: 'PUT',
        body: { days: 120 },
      }),
    );
    const readersLog = async () =>
      (
        expectOk(
          await callApi(`/api/${org}/platform/audit-log?order=asc&limit=1000`, basicAuth(reader), {
            base: early.url,
          }),
        ) as { records: AuditRecord[] }
      ).records;
    await vi.waitFor(async () => {
      expect((await readersLog()).map((r) => r.action)).toContain('organization.create');
    }, EVENTUALLY);

    lookup.open();
    expect(expectOk(await lateCall)).toMatchObject({ id: org, name: 'Twice', enabled: true });
    // A create repeated after both is one more call that finds the record.
    expectOk(await create(early));

    expect(await testDb()(INCARNATIONS).where({ org }).count({ n: '*' })).toEqual([{ n: '1' }]);
    expect((await readersLog()).map((r) => r.action)).toContain('organization.create');
    expect(
      expectOk(
        await callApi(`/api/${org}/platform/audit-log/retention`, basicAuth(reader), {
          base: early.url,
        }),
      ),
    ).toMatchObject({ chosen: true, days: 120 });
  }, 120_000);
});
