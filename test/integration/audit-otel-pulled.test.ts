import { hostname } from 'node:os';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createKeycloakEventCursors } from '../../src/audit/keycloak-event-cursors.ts';
import { SETTLE_MS } from '../../src/audit/keycloak-event-pull.ts';
import { REALM_EVENTS_SETTINGS } from '../../src/audit/keycloak-event-records.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, keycloakAdmin, type TestUser } from '../helpers/keycloak.ts';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.ts';
import { createOrganization, migratedOwnDatabase } from '../helpers/platform.ts';
import { ownDatabase } from '../helpers/postgres-server.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';
import { takeTurns } from '../helpers/turns.ts';

/** More Keycloak events than the replica's spool (AUDIT_SPOOL_MAX_RECORDS, its least) holds. */
const SPOOL = 100;
const SIGN_INS = SPOOL + 10;
/** The test's own hold on the realm's lease, until it hands the lease to the replica. */
const TEST_HOLDER = 'audit-otel-pulled.test.ts';

/**
 * Keycloak's events delivered as OpenTelemetry logs (AUDIT_OTEL_LOGS), with the real Keycloak,
 * PostgreSQL and an OTLP/HTTP receiver listening here: a pull that finds the spool full waits
 * for it to be written and offers the refused event again, so it takes all the realm's new
 * events, in the log and at the collector once each. On a database of the suite's own: the
 * replica's rounds cover this suite's realm and master, not every organization other suites made
 * in the shared one. Ports 19874/19875 (the replica).
 */
// Each wait may take up to EVENTUALLY on a loaded machine: room for all of them.
describe(
  'audit log: OpenTelemetry logs of pulled Keycloak events',
  { timeout: 5 * EVENTUALLY.timeout },
  () => {
    takeTurns('keycloak-event-pulls');
    const env = testEnv();
    const database = ownDatabase('otelpulled');
    let db: Knex;
    let receiver: OtlpReceiver;
    let replica: Replica | undefined;
    let org: string;
    let member: TestUser;

    beforeAll(async () => {
      receiver = await startOtlpReceiver();
      db = await migratedOwnDatabase(database);
      org = await createOrganization([], 0, db);
      member = await createUser(org);
      const admin = await keycloakAdmin();
      const config = await admin.realms.getConfigEvents({ realm: org });
      await admin.realms.updateConfigEvents(
        { realm: org },
        { ...config, ...REALM_EVENTS_SETTINGS },
      );
      // Held here, then handed to the replica once it runs: the lease's release ends the one pull
      // of the realm that must take all its events (and deliver them over OpenTelemetry).
      const cursors = createKeycloakEventCursors(db, 'audit');
      await vi.waitFor(
        async () => expect(await cursors.claim(org, TEST_HOLDER, 600_000)).toBeDefined(),
        EVENTUALLY,
      );
    });

    afterAll(async () => {
      await replica?.gateway.close();
      await receiver?.close();
      await db?.destroy();
      await database.drop();
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
          DATABASE_URL: database.url(),
          OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
          OTEL_SERVICE_NAME: 'realmgate-audit-otel-pulled',
          AUDIT_OTEL_LOGS: 'true',
          AUDIT_SPOOL_MAX_RECORDS: String(SPOOL),
          AUDIT_KEYCLOAK_EVENTS_SECONDS: '1',
        },
        undefined,
        clock,
      );

      // The replica's pulls hold leases under its holder name, made of this process's: the
      // realm's lease is handed to it, so it takes the realm's events at its next pull.
      const ours = `${hostname()}:${process.pid}:%`;
      const holderOf = async (table: string) =>
        (await db(table).whereLike('holder', ours).first<{ holder: string } | undefined>('holder'))
          ?.holder;
      let holder: string | undefined;
      await expect
        .poll(
          async () =>
            (holder =
              (await holderOf('auth_keycloak_pulls')) ?? (await holderOf('audit_keycloak_pulls'))),
          { ...EVENTUALLY, interval: 5 },
        )
        .toBeDefined();
      await db('audit_keycloak_pulls')
        .where({ realm: org, holder: TEST_HOLDER })
        .update({
          holder,
          lease_until: db.raw(`now() + interval '10 minutes'`),
        });
      const lease = async () =>
        (
          await db('audit_keycloak_pulls')
            .where({ realm: org })
            .first<{ holder: string | null }>('holder')
        )?.holder;
      await expect.poll(lease, EVENTUALLY).toBeNull();

      const stored = async () =>
        (
          await db('audit_log')
            .where({ org, action: 'keycloak.login' })
            .count<{ count: string }[]>({ count: '*' })
        )[0]!.count;
      // That one pull took them all: what the full spool refused at first was written once the
      // spool had room, not left for a later pull (a round over every realm later).
      expect(await stored()).toBe(String(SIGN_INS));
      const delivered = () =>
        receiver.logs
          .filter((l) => l.attributes['realmgate.audit.org'] === org)
          .map((l) => String(l.attributes['realmgate.audit.details.keycloakEventId']));
      await expect.poll(() => new Set(delivered()).size, EVENTUALLY).toBe(SIGN_INS);
      // The pull met a full spool (SPOOL < SIGN_INS) and offered again what it refused: no
      // record lost, none counted as lost, readiness not degraded by it.
      const admin = `http://127.0.0.1:${replica.config.ADMIN_PORT}`;
      const metrics = await (await fetch(`${admin}/metrics`)).text();
      expect(metrics).not.toMatch(/realmgate_audit_records_total\{outcome="lost"\} [1-9]/);
      const ready = (await (await fetch(`${admin}/readyz`)).json()) as {
        data: { audit_log: { status: string; lost: number } };
      };
      expect(ready.data.audit_log).toMatchObject({ status: 'up', lost: 0 });
      // The replica's last delivery is sent before it stops.
      await replica.gateway.close();
      replica = undefined;
      expect(delivered()).toHaveLength(SIGN_INS);
    });
  },
);
