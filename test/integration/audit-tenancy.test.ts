import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { AuditRecord } from '../../src/audit/audit-chain.ts';
import { createCheckpointer } from '../../src/audit/audit-checkpointer.ts';
import { signedJsonLines, storedCheckpoints } from '../../src/audit/audit-export-signed.ts';
import { createAuditIncarnations } from '../../src/audit/audit-incarnations.ts';
import { createAuditLogRepo } from '../../src/audit/audit-log.repo.ts';
import { createRetentionChoices, pruneAuditLog } from '../../src/audit/audit-retention.ts';
import { openCheckpointSigner, publishedKeys } from '../../src/audit/audit-signing-key.ts';
import { createAuditWriter } from '../../src/audit/audit-writer.ts';
import { createExportVerifier } from '../../src/audit/export-verifier.ts';
import { createKeycloakEventCursors } from '../../src/audit/keycloak-event-cursors.ts';
import { createKeycloakEventPull, SETTLE_MS } from '../../src/audit/keycloak-event-pull.ts';
import { createKeycloakEventSource } from '../../src/audit/keycloak-event-source.ts';
import { readKeys, verifyExport } from '../../src/cli/audit-verify.ts';
import { createLogger } from '../../src/http/logger.ts';
import { createAdminSession } from '../../src/keycloak/admin-session.ts';
import { createKeycloakCalls } from '../../src/keycloak/keycloak-calls.ts';
import { systemClock } from '../../src/time/clock.ts';
import { basicAuth, callApi, type ApiResponse } from '../helpers/api.ts';
import { grantReaderRole } from '../helpers/audit-readers.ts';
import { apiEvent } from '../helpers/audit-records.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, uniqueId, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';
import { takeTurns } from '../helpers/turns.ts';

const DAY = 24 * 3600 * 1000;
const BOUNDS = { defaultDays: 365, minDays: 1, maxDays: 3650 };

function expectOk(answer: ApiResponse): unknown {
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.data;
}

/**
 * A log whose id named more than one organization, and a deleted organization's log, against
 * the real Keycloak and PostgreSQL: the deleted organization's records keep its retention, not
 * the new organization's; a platform administrator reads and exports a deleted organization's
 * log, which verifies; a new organization's realm saves its sign-ins from its creation.
 * Ports 19890/19891.
 */
describe('audit log: organizations deleted, and their ids used again', () => {
  takeTurns('keycloak-event-pulls');
  let gateway: Replica;
  let admin: string;
  const files: string[] = [];
  const db = () => testDb();

  beforeAll(async () => {
    gateway = await startReplica(19890, {
      AUDIT_CHECKPOINT_RECORDS: '5',
      AUDIT_CHECKPOINT_SECONDS: '1',
      // The replica makes realms that save their events; the test pulls them itself.
      AUDIT_KEYCLOAK_EVENTS_SECONDS: '3600',
    });
    admin = basicAuth(await createUser('master'));
  });

  afterAll(async () => {
    await gateway?.gateway.close();
    await Promise.all(files.map((file) => rm(file, { force: true })));
    await closeTestDb();
  });

  async function write(org: string, times: number[]): Promise<void> {
    const writer = createAuditWriter({
      db: db(),
      logger: createLogger('silent'),
      metrics: { auditRecords: () => undefined },
      spoolMax: 1000,
      batchMax: 1000,
      intervalMs: 60_000,
    });
    for (const at of times) writer.record(apiEvent(org, at));
    await writer.close(5000);
  }

  let signer: ReturnType<typeof openCheckpointSigner> | undefined;
  const checkpointer = () =>
    createCheckpointer({
      db: db(),
      signer: () =>
        (signer ??= openCheckpointSigner({ db: db(), clock: systemClock, signingKey: undefined })),
      clock: systemClock,
      period: { records: 1000, ms: 60_000 },
    });

  async function seqs(table: string, org: string): Promise<number[]> {
    return (await db()(table).where({ org }).orderBy('seq').pluck('seq')).map(Number);
  }

  async function verified(org: string) {
    const signatures = {
      keys: publishedKeys({
        db: db(),
        clock: systemClock,
        signingKey: undefined,
        previousKeys: undefined,
      }),
      ...storedCheckpoints(db()),
      signer: () =>
        (signer ??= openCheckpointSigner({ db: db(), clock: systemClock, signingKey: undefined })),
      now: () => systemClock.now(),
    };
    const repo = createAuditLogRepo(db());
    const span = await repo.span(org, {});
    const verifier = createExportVerifier();
    let line = 0;
    for await (const text of signedJsonLines(
      org,
      repo.records(org, {}, span),
      signatures,
      span.last,
    )) {
      await verifier.line(JSON.parse(text), ++line);
    }
    return verifier.finish();
  }

  it("keeps a deleted organization's records for its own days, whatever the new organization chooses", async () => {
    const now = Date.now();
    const incarnations = createAuditIncarnations(db());
    const choices = createRetentionChoices(db());

    // The first organization chose ten years; the new one under its id chooses 30 days.
    const kept = `keep-${randomBytes(4).toString('hex')}`;
    await incarnations.begin(kept, new Date(now - 500 * DAY));
    await choices.set(kept, 3650);
    await write(kept, [now - 400 * DAY, now - 400 * DAY, now - 400 * DAY]);
    await checkpointer().checkpoint(kept);
    await incarnations.begin(kept, new Date(now - 200 * DAY));
    await choices.set(kept, 30);
    await write(kept, [now - 200 * DAY, now - 200 * DAY]);
    await checkpointer().checkpoint(kept);
    await write(kept, [now]);

    // The first organization chose nothing (365 days); the new one chooses ten years.
    const pruned = `prune-${randomBytes(4).toString('hex')}`;
    await incarnations.begin(pruned, new Date(now - 500 * DAY));
    await write(pruned, [now - 400 * DAY, now - 400 * DAY, now - 400 * DAY]);
    await checkpointer().checkpoint(pruned);
    await incarnations.begin(pruned, new Date(now - 10 * DAY));
    await choices.set(pruned, 3650);
    await write(pruned, [now - 10 * DAY, now]);
    await checkpointer().checkpoint(pruned);

    await pruneAuditLog(db(), BOUNDS, systemClock);

    // The deleted organization's records, within its ten years, stay; the new organization's
    // records past its 30 days wait for them (a log is pruned from its start).
    expect(await seqs('audit_log', kept)).toEqual([1, 2, 3, 4, 5, 6]);
    // The deleted organization's records past the platform's 365 days go, up to a checkpoint.
    expect(await seqs('audit_log', pruned)).toEqual([4, 5]);
    await expect(verified(pruned)).resolves.toMatchObject({
      firstSeq: 4,
      lastSeq: 5,
      anchored: true,
    });
  });

  it("lets a platform administrator read and export a deleted organization's log, which verifies", async () => {
    const org = await createOrganization([]);
    const other = await createOrganization([]);
    const foreign: TestUser = await createUser(other);
    await grantReaderRole(foreign);
    // The organization's history: a change in it, then its deletion.
    expectOk(
      await callApi(`/api/platform/organizations/${org}/audit-log/retention`, admin, {
        base: gateway.url,
        method: 'PUT',
        body: { days: 400 },
      }),
    );
    expectOk(
      await callApi(`/api/platform/organizations/${org}?confirm=${org}`, admin, {
        base: gateway.url,
        method: 'DELETE',
      }),
    );
    const path_ = `/api/platform/organizations/${org}/audit-log`;
    let records: AuditRecord[] = [];
    await vi.waitFor(async () => {
      const answer = await callApi(`${path_}?order=asc&limit=1000`, admin, { base: gateway.url });
      ({ records } = expectOk(answer) as { records: AuditRecord[] });
      expect(records.map((r) => r.action)).toContain('organization.delete');
    }, EVENTUALLY);
    expect(records.map((r) => r.action)).toContain('audit_log.retention.change');

    // Signed through the deletion, then exported as an auditor gets it.
    const deleted = records.find((r) => r.action === 'organization.delete')!.seq;
    await expect
      .poll(
        async () =>
          Number(
            (
              await db()('audit_checkpoints').where({ org }).max<{ seq: unknown }[]>({ seq: 'seq' })
            )[0]?.seq ?? 0,
          ),
        EVENTUALLY,
      )
      .toBeGreaterThanOrEqual(deleted);
    const exported = await fetch(`${gateway.url}${path_}/export`, {
      headers: { authorization: admin },
    });
    expect(exported.status).toBe(200);
    const file = path.join(os.tmpdir(), `deleted-${org}.jsonl`);
    files.push(file);
    await writeFile(file, await exported.text());
    const keys = await readKeys(`${gateway.url}/.well-known/audit-keys`);
    await expect(verifyExport(file, keys)).resolves.toMatchObject({
      org,
      firstSeq: 1,
      anchored: true,
    });

    // The reading is recorded, in master's log and in the deleted organization's.
    await vi.waitFor(async () => {
      const reads = expectOk(
        await callApi(`${path_}?action=audit_log.export`, admin, { base: gateway.url }),
      ) as { records: AuditRecord[] };
      expect(reads.records.length).toBeGreaterThan(0);
    }, EVENTUALLY);

    // Another organization's audit reader is refused: at the platform's path its credentials
    // are not master's, and its own path cannot name the deleted organization.
    const refused = await callApi(path_, basicAuth(foreign), { base: gateway.url });
    expect(refused.status).toBe(401);
    const own = await callApi(`/api/${org}/platform/audit-log`, basicAuth(foreign), {
      base: gateway.url,
    });
    expect(own.status).toBe(404);
    // An id that never named an organization has no log.
    const never = await callApi(
      `/api/platform/organizations/${uniqueId('never-')}/audit-log`,
      admin,
      { base: gateway.url },
    );
    expect(never.status).toBe(404);
  });

  it("saves a new organization's sign-ins from its creation, before any pull", async () => {
    const env = testEnv();
    const org = uniqueId('events-');
    expectOk(
      await callApi('/api/platform/organizations', admin, {
        base: gateway.url,
        method: 'POST',
        body: { id: org, name: 'Events' },
      }),
    );
    const user = await createUser(org);
    const signedIn = await fetch(`${env.keycloakUrl}/realms/${org}/protocol/openid-connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'password',
        client_id: 'admin-cli',
        username: user.username,
        password: user.password,
      }),
    });
    expect(signedIn.status).toBe(200);

    // The first pull of the realm, driven by the test (Keycloak stamps an event before it is
    // saved: the pull's time is ahead by its settling time).
    const clock = aheadClock();
    clock.advance(SETTLE_MS);
    const writer = createAuditWriter({
      db: db(),
      logger: createLogger('silent'),
      metrics: { auditRecords: () => undefined },
      spoolMax: 1000,
      batchMax: 100,
      intervalMs: 50,
    });
    const calls = createKeycloakCalls({ keycloakUrl: env.keycloakUrl, timeoutMs: 10_000 });
    const pull = createKeycloakEventPull({
      purpose: 'audit',
      source: createKeycloakEventSource({
        calls,
        adminSession: createAdminSession({
          calls,
          username: env.keycloakAdminUsername,
          password: env.keycloakAdminPassword,
        }),
        adminUsername: env.keycloakAdminUsername,
      }),
      cursors: createKeycloakEventCursors(db(), 'audit'),
      writer,
      realms: () => Promise.resolve([org]),
      holder: `events:${Math.random()}`,
      clock,
      logger: createLogger('silent'),
      metrics: { keycloakEventPull: () => undefined },
    });
    try {
      await expect
        .poll(async () => {
          await pull.pullRealm(org);
          return db()('audit_log')
            .where({ org, action: 'keycloak.login', actor_name: user.username })
            .pluck('seq');
        }, EVENTUALLY)
        .toHaveLength(1);
    } finally {
      await writer.close(5000);
    }
  });
});
