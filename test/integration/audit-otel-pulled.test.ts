import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SETTLE_MS } from '../../src/audit/keycloak-event-pull.ts';
import { REALM_EVENTS_SETTINGS } from '../../src/audit/keycloak-event-records.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, keycloakAdmin, type TestUser } from '../helpers/keycloak.ts';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/** More Keycloak events than the replica's spool (AUDIT_SPOOL_MAX_RECORDS, its least) holds. */
const SPOOL = 100;
const SIGN_INS = SPOOL + 10;

/**
 * Keycloak's events delivered as OpenTelemetry logs (AUDIT_OTEL_LOGS), with the real Keycloak,
 * PostgreSQL and an OTLP/HTTP receiver listening here: a pull that finds the spool full leaves
 * the refused event for the next pull, and the collector still gets each event once, as the
 * database log does. Ports 19874/19875 (the replica).
 */
describe('audit log: OpenTelemetry logs of pulled Keycloak events', () => {
  const env = testEnv();
  let receiver: OtlpReceiver;
  let replica: Replica | undefined;
  let org: string;
  let member: TestUser;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    org = await createOrganization([]);
    member = await createUser(org);
    const admin = await keycloakAdmin();
    const config = await admin.realms.getConfigEvents({ realm: org });
    await admin.realms.updateConfigEvents({ realm: org }, { ...config, ...REALM_EVENTS_SETTINGS });
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await receiver?.close();
    await closeTestDb();
  });

  /** A password grant at Keycloak's own port: one LOGIN event in the realm. */
  async function signIn(): Promise<void> {
    const res = await fetch(`${env.keycloakUrl}/realms/${org}/protocol/openid-connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'password',
        client_id: 'admin-cli',
        username: member.username,
        password: member.password,
      }),
    });
    expect(res.status).toBe(200);
  }

  it('sends each pulled event once, also the one a full spool refused at first', async () => {
    // All in Keycloak before the replica's first pull, which then takes more than its spool holds.
    for (let i = 0; i < SIGN_INS; i += 10) {
      await Promise.all(Array.from({ length: Math.min(10, SIGN_INS - i) }, signIn));
    }
    // Ahead by the settling time: the events just made are taken at the first pull.
    const clock = aheadClock();
    clock.advance(SETTLE_MS);
    replica = await startReplica(
      19874,
      {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_SERVICE_NAME: 'realmgate-audit-otel-pulled',
        AUDIT_OTEL_LOGS: 'true',
        AUDIT_SPOOL_MAX_RECORDS: String(SPOOL),
        AUDIT_KEYCLOAK_EVENTS_SECONDS: '1',
      },
      undefined,
      clock,
    );

    const stored = async () =>
      (
        await testDb()('audit_log')
          .where({ org, action: 'keycloak.login' })
          .count<{ count: string }[]>({ count: '*' })
      )[0]!.count;
    await expect.poll(stored, EVENTUALLY).toBe(String(SIGN_INS));
    const delivered = () =>
      receiver.logs
        .filter((l) => l.attributes['realmgate.audit.org'] === org)
        .map((l) => String(l.attributes['realmgate.audit.details.keycloakEventId']));
    await expect.poll(() => new Set(delivered()).size, EVENTUALLY).toBe(SIGN_INS);
    // The first pull did meet a full spool (what it refused is counted as not kept).
    const metrics = await (
      await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/metrics`)
    ).text();
    expect(metrics).toMatch(/realmgate_audit_records_total\{outcome="lost"\} [1-9]/);
    // The replica's last delivery is sent before it stops.
    await replica.gateway.close();
    replica = undefined;
    expect(delivered()).toHaveLength(SIGN_INS);
  });
});
