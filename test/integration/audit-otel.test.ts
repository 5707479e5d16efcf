import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../src/audit/audit-chain.ts';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import {
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedLog,
} from '../helpers/otlp-receiver.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';

/**
 * The audit log delivered as OpenTelemetry logs (AUDIT_OTEL_LOGS) to a real OTLP/HTTP receiver
 * listening here: the records of an allowed and a refused call arrive with the same chosen
 * fields the database log keeps, and without the password sent. Port 21120 (the replica).
 */
describe('audit log: OpenTelemetry logs', () => {
  let receiver: OtlpReceiver;
  let replica: Replica;
  let org: string;
  let member: TestUser;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    replica = await startReplica(21120, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_SERVICE_NAME: 'realmgate-audit-otel',
      AUDIT_OTEL_LOGS: 'true',
    });
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await receiver?.close();
    await closeTestDb();
  });

  /** The log record of the call `requestId` answered, once it arrived. */
  async function arrived(requestId: string): Promise<ReceivedLog> {
    let found: ReceivedLog | undefined;
    await expect
      .poll(() => {
        found = receiver.logs.find((l) => l.attributes['realmgate.request_id'] === requestId);
        return found;
      }, EVENTUALLY)
      .toBeDefined();
    return found!;
  }

  async function stored(requestId: string): Promise<AuditRecord> {
    let record: AuditRecord | undefined;
    await expect
      .poll(async () => {
        const row = await testDb()<AuditRow>('audit_log')
          .where({ org, request_id: requestId })
          .first();
        record = row && recordOf(row);
        return record;
      }, EVENTUALLY)
      .toBeDefined();
    return record!;
  }

  it('sends each record as a log record with its chosen fields, no secret', async () => {
    const allowed = await callApi(`/api/${org}/platform/workspaces`, basicAuth(member), {
      base: replica.url,
    });
    const wrong = 'wrong-password-for-otel';
    const refused = await callApi(
      `/api/${org}/platform/workspaces`,
      basicAuth({ ...member, password: wrong }),
      { base: replica.url },
    );
    expect(refused.status).toBe(401);

    const ok = await arrived(allowed.headers.get('x-request-id')!);
    const record = await stored(allowed.headers.get('x-request-id')!);
    expect(ok).toMatchObject({
      service: 'realmgate-audit-otel',
      eventName: 'realmgate.audit',
      timeMs: Date.parse(record.at),
      severityNumber: 9,
      body: 'api.request',
      attributes: {
        'realmgate.audit.org': org,
        'realmgate.audit.action': 'api.request',
        'realmgate.audit.outcome': record.outcome,
        'realmgate.audit.actor.name': member.username,
        'realmgate.audit.credential': 'basic',
        'http.request.method': 'GET',
        'http.route': record.route,
        'url.path': record.path,
        'http.response.status_code': allowed.status,
        'client.address': record.address,
      },
    });
    const no = await arrived(refused.headers.get('x-request-id')!);
    expect(no).toMatchObject({
      severityNumber: 13,
      attributes: {
        'realmgate.audit.outcome': 'failure',
        'realmgate.audit.reason': 'wrong_password',
        'http.response.status_code': 401,
      },
    });
    const sent = JSON.stringify(receiver.logs);
    expect(sent).not.toContain(member.password);
    expect(sent).not.toContain(wrong);
  });
});
