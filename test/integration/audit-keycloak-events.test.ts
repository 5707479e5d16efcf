import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import type { AuditRecord } from '../../src/audit/audit-chain.ts';
import { createAuditWriter, type AuditWriter } from '../../src/audit/audit-writer.ts';
import { createKeycloakEventCursors } from '../../src/audit/keycloak-event-cursors.ts';
import {
  createKeycloakEventPull,
  SETTLE_MS,
  type KeycloakEventPull,
} from '../../src/audit/keycloak-event-pull.ts';
import { createKeycloakEventSource } from '../../src/audit/keycloak-event-source.ts';
import { pullKeycloakEvents } from '../../src/audit/keycloak-events.area.ts';
import type { Config } from '../../src/config/config.ts';
import type { OrganizationsRepo } from '../../src/platform/organizations.repo.ts';
import { systemClock } from '../../src/time/clock.ts';
import { createAdminSession } from '../../src/keycloak/admin-session.ts';
import { createKeycloakCalls } from '../../src/keycloak/keycloak-calls.ts';
import { verifyExport } from '../../src/cli/audit-commands.ts';
import { createLogger } from '../../src/http/logger.ts';
import { basicAuth } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import {
  createUser,
  grantRealmManagementRole,
  keycloakAdmin,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';
import { ensureOrganizationRealm } from '../../src/platform/realm-admin/provisioning.ts';
import { takeTurns } from '../helpers/turns.ts';

/**
 * Keycloak's own events in the audit log, with the real Keycloak and PostgreSQL: a sign-in and
 * an admin change made in Keycloak itself (not through the gateway) come into the organization's
 * log once and in time order, whichever of two replicas pulls and however often; a restarted
 * replica resumes after what was taken; the gateway's own Keycloak calls are not shown twice; an
 * export with them verifies. Each "replica" here is a pull of its own (its own Keycloak session,
 * writer and lease holder) on the shared database, driven by the test instead of a timer.
 */
describe('audit log: Keycloak events', () => {
  takeTurns('keycloak-event-pulls');
  const env = testEnv();
  const logger = createLogger('silent');
  /** Keycloak stamps an event before it is saved: the pulls' time is ahead by their settling time. */
  const clock = aheadClock();
  clock.advance(SETTLE_MS);
  const writers: AuditWriter[] = [];
  let org: string;
  /** A user of the organization who administers its users in Keycloak directly. */
  let keeper: TestUser;
  let keeperId: string;
  const failures: string[] = [];

  /** A writer and a Keycloak client layer of their own, as a replica has. */
  function replicaParts(keycloakUrl = env.keycloakUrl) {
    const writer = createAuditWriter({
      db: testDb(),
      logger,
      metrics: { auditRecords: () => undefined },
      spoolMax: 1000,
      batchMax: 100,
      intervalMs: 50,
    });
    writers.push(writer);
    const calls = createKeycloakCalls({ keycloakUrl, timeoutMs: 10_000 });
    const adminSession = createAdminSession({
      calls,
      username: env.keycloakAdminUsername,
      password: env.keycloakAdminPassword,
    });
    return { writer, keycloak: { calls, adminSession } };
  }

  function replica(name: string, keycloakUrl = env.keycloakUrl): KeycloakEventPull {
    const { writer, keycloak } = replicaParts(keycloakUrl);
    return createKeycloakEventPull({
      purpose: 'audit',
      source: createKeycloakEventSource({
        ...keycloak,
        adminUsername: env.keycloakAdminUsername,
      }),
      cursors: createKeycloakEventCursors(testDb(), 'audit'),
      writer,
      realms: () => Promise.resolve([org]),
      holder: `${name}:${Math.random()}`,
      clock,
      logger,
      metrics: {
        keycloakEventPull: (outcome) => void (outcome === 'failed' && failures.push(name)),
      },
    });
  }

  async function keycloakRecords(): Promise<AuditRecord[]> {
    const rows = await testDb()<AuditRow>('audit_log')
      .where({ org })
      .whereLike('action', 'keycloak.%')
      .orderBy('seq');
    return rows.map(recordOf);
  }

  /** Pulls with `pull` until `count` Keycloak records are in the log. */
  async function pulledUntil(pull: KeycloakEventPull, count: number): Promise<AuditRecord[]> {
    let records: AuditRecord[] = [];
    await expect
      .poll(async () => {
        await pull.pullRealm(org);
        records = await keycloakRecords();
        return records.length;
      }, EVENTUALLY)
      .toBeGreaterThanOrEqual(count);
    return records;
  }

  /** A password grant at Keycloak's own port, on the realm's `admin-cli` client. */
  async function signIn(user: TestUser, password = user.password): Promise<Response> {
    return fetch(`${env.keycloakUrl}/realms/${org}/protocol/openid-connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'password',
        client_id: 'admin-cli',
        username: user.username,
        password,
      }),
    });
  }

  let a: KeycloakEventPull;
  let b: KeycloakEventPull;

  beforeAll(async () => {
    org = await createOrganization([]);
    keeper = await createUser(org);
    keeperId = await userIdOf(keeper);
    await grantRealmManagementRole(keeper, 'manage-users');
    a = replica('a');
    b = replica('b');
    // The first pull turns event saving on in the realm (and master).
    await a.pullRealm(org);
    const admin = await keycloakAdmin();
    const config = await admin.realms.getConfigEvents({ realm: org });
    expect(config).toMatchObject({
      eventsEnabled: true,
      adminEventsEnabled: true,
      adminEventsDetailsEnabled: false,
    });
  });

  afterAll(async () => {
    for (const writer of writers) await writer.close(5000);
    await closeTestDb();
  });

  it('a sign-in and an admin change made in Keycloak are in the log once, in time order; the gateway’s own calls are not', async () => {
    const wrong = await signIn(keeper, 'not-the-password');
    // Keycloak answers a wrong password 400 since 26.6 (401 before).
    expect(wrong.status).toBe(400);
    const signedIn = await signIn(keeper);
    expect(signedIn.status).toBe(200);
    const { access_token: token } = (await signedIn.json()) as { access_token: string };
    const newcomer = `newcomer-${Math.random().toString(16).slice(2, 10)}`;
    const created = await fetch(`${env.keycloakUrl}/admin/realms/${org}/users`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        username: newcomer,
        enabled: true,
        credentials: [{ type: 'password', value: 'Secret-in-a-body-1', temporary: false }],
      }),
    });
    expect(created.status).toBe(201);
    // A change made with the gateway's own administrator: the gateway records its changes itself.
    await createUser(org);

    // Both replicas pull, at the same time and one after the other.
    await pulledUntil(a, 3);
    await Promise.all([a.pullRealm(org), b.pullRealm(org), a.pullRealm(org)]);
    await b.pullRealm(org);
    const records = await keycloakRecords();
    expect(records.map((r) => [r.action, r.outcome])).toEqual([
      ['keycloak.login', 'failure'],
      ['keycloak.login', 'success'],
      ['keycloak.admin.user.create', 'success'],
    ]);
    const [failed, login, change] = records as [AuditRecord, AuditRecord, AuditRecord];
    expect(failed).toMatchObject({
      actorRealm: org,
      clientId: 'admin-cli',
      reason: 'invalid_user_credentials',
      details: { source: 'keycloak', keycloakType: 'LOGIN_ERROR' },
    });
    expect(login).toMatchObject({
      actorId: keeperId,
      actorName: keeper.username,
      clientId: 'admin-cli',
      address: '127.0.0.1',
      details: { source: 'keycloak', keycloakType: 'LOGIN', grant_type: 'password' },
    });
    expect(change).toMatchObject({
      actorRealm: org,
      actorId: keeperId,
      details: { source: 'keycloak', keycloakType: 'CREATE USER' },
    });
    expect(change.path).toMatch(/^users\/[0-9a-f-]{36}$/);
    expect(Date.parse(failed.at)).toBeLessThanOrEqual(Date.parse(login.at));
    expect(Date.parse(login.at)).toBeLessThanOrEqual(Date.parse(change.at));
    const stored = JSON.stringify(
      await testDb()('audit_log').where({ org }).whereLike('action', 'keycloak.%'),
    );
    for (const secret of [keeper.password, 'Secret-in-a-body-1', token]) {
      expect(stored).not.toContain(secret);
    }
    expect(failures).toEqual([]);
  });

  it('a restarted replica resumes after the events taken, also when it stopped before moving the cursor', async () => {
    const before = await keycloakRecords();
    expect((await signIn(keeper)).status).toBe(200);
    const restarted = replica('a-restarted');
    const after = await pulledUntil(restarted, before.length + 1);
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.slice(before.length).map((r) => r.action)).toEqual(['keycloak.login']);

    // Records written, cursor not moved (a replica stopped between the two): nothing twice.
    await testDb()('audit_keycloak_pulls')
      .where({ realm: org })
      .update({ user_time: null, user_ids: '[]', admin_time: null, admin_ids: '[]' });
    await replica('b-restarted').pullRealm(org);
    const ids = (await keycloakRecords()).map((r) => r.details.keycloakEventId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(after.length);
  });

  it("the auth area's pull moves its own cursor: the log still takes the events it took", async () => {
    const told: string[] = [];
    const { keycloak } = replicaParts();
    const auth = createKeycloakEventPull({
      purpose: 'auth',
      source: createKeycloakEventSource({ ...keycloak, adminUsername: env.keycloakAdminUsername }),
      cursors: createKeycloakEventCursors(testDb(), 'auth'),
      seen: (_realm, events) => {
        told.push(...events.user.map((e) => e.id));
        return Promise.resolve();
      },
      realms: () => Promise.resolve([org]),
      holder: `auth:${Math.random()}`,
      clock,
      logger,
      metrics: { keycloakEventPull: () => undefined },
    });
    const before = await keycloakRecords();
    expect((await signIn(keeper)).status).toBe(200);
    // The sign-in's event, as Keycloak keeps it (newest first; the library's type lacks its id).
    const [event] = (await (
      await keycloakAdmin()
    ).realms.findEvents({ realm: org, user: keeperId, type: 'LOGIN', max: 1 })) as { id: string }[];
    const signedIn = event!.id;
    await expect
      .poll(async () => {
        await auth.pullRealm(org);
        return told.includes(signedIn);
      }, EVENTUALLY)
      .toBe(true);
    expect(await keycloakRecords()).toEqual(before);
    await pulledUntil(a, before.length + 1);
    expect((await keycloakRecords()).map((r) => r.details.keycloakEventId)).toContain(signedIn);
    // And the log's pulls left the auth cursor where it was: nothing new is told.
    const count = told.length;
    await auth.pullRealm(org);
    expect(told.length).toBe(count);
  });

  it('an export including them verifies offline', async () => {
    const admin = await createUser('master');
    const res = await fetch(`${env.publicUrl}/api/platform/organizations/${org}/audit-log/export`, {
      headers: { authorization: basicAuth(admin) },
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('"action":"keycloak.admin.user.create"');
    const dir = await mkdtemp(join(tmpdir(), 'audit-kc-'));
    try {
      const file = join(dir, 'export.jsonl');
      await writeFile(file, text);
      const verified = await verifyExport(file);
      expect(verified).toMatchObject({ org, firstSeq: 1 });
      // Every line a record, but the keys and checkpoints that sign them (they carry a `type`).
      const lines = text.split('\n').filter(Boolean);
      const records = lines.filter((line) => !('type' in (JSON.parse(line) as object)));
      expect(verified.records).toBe(records.length);
    } finally {
      await rm(dir, { recursive: true });
    }
  });

  it('Keycloak unreachable: the pull fails, is counted, and takes the events later', async () => {
    const before = failures.length;
    const cut = replica('cut-off', 'http://127.0.0.1:9/auth');
    await cut.pullAll();
    expect(failures.length).toBe(before + 1);
    expect((await signIn(keeper)).status).toBe(200);
    const count = (await keycloakRecords()).length;
    await pulledUntil(a, count + 1);
  });

  it("a gateway's schedule pulls master's and the organizations' realms by itself", async () => {
    const { writer, keycloak } = replicaParts();
    const pulls = pullKeycloakEvents(
      {
        config: {
          AUDIT_KEYCLOAK_EVENTS_SECONDS: 1,
          KEYCLOAK_ADMIN_USERNAME: env.keycloakAdminUsername,
        } as Config,
        logger,
        clock: systemClock,
        db: testDb(),
        metrics: { keycloakEventPull: () => undefined },
      },
      { organizationsRepo: { list: () => Promise.resolve([{ id: org }]) } as OrganizationsRepo },
      keycloak,
      { writer },
    );
    try {
      const count = (await keycloakRecords()).length;
      expect((await signIn(keeper)).status).toBe(200);
      await expect.poll(async () => (await keycloakRecords()).length, EVENTUALLY).toBe(count + 1);
    } finally {
      await pulls.stop();
    }
  });

  it('takes the events of an organization created again under the same id', async () => {
    // Replica a knows the realm (its events turned on, its gateway account) from its pulls.
    const admin = await keycloakAdmin();
    await admin.realms.del({ realm: org });
    await ensureOrganizationRealm(admin, {
      organizationId: org,
      organizationName: 'Again',
      gatewayClientSecret: env.gatewayClientSecret,
    });
    const newcomer = await createUser(org);
    await a.pullRealm(org);
    expect(await admin.realms.getConfigEvents({ realm: org })).toMatchObject({
      eventsEnabled: true,
      adminEventsEnabled: true,
    });
    expect((await signIn(newcomer)).status).toBe(200);
    let records: AuditRecord[] = [];
    await expect
      .poll(async () => {
        await a.pullRealm(org);
        records = await keycloakRecords();
        return records.some(
          (r) => r.action === 'keycloak.login' && r.actorName === newcomer.username,
        );
      }, EVENTUALLY)
      .toBe(true);
  });
});
