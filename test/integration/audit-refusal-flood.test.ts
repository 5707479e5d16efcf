import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyChain, type AuditRecord } from '../../src/audit/audit-chain.ts';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import {
  REFUSALS_RECORDED_PER_WINDOW,
  REFUSAL_WINDOW_MS,
} from '../../src/audit/refusal-summaries.ts';
import { verifyExport } from '../../src/cli/audit-verify.ts';
import { basicAuth } from '../helpers/api.ts';
import { grantReaderRole } from '../helpers/audit-readers.ts';
import { requestFrom } from '../helpers/from-address.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

const FLOOD = '127.0.0.2';
const CALLER = '127.0.0.1';

/**
 * One hostile address floods an organization's `/api` with refused requests (unknown Basic
 * users, garbage Bearer tokens) while a right caller works from another address. The replica
 * holds its records until it stops (a minute between writes) in a spool of 100: the flood must
 * neither push the right caller's records out of it nor make a row per refusal in the log.
 * Port 19760 (and 19761).
 */
describe('audit log under a flood of refusals', () => {
  let replica: Replica;
  let org: string;
  let member: TestUser;

  beforeAll(async () => {
    replica = await startReplica(19760, {
      AUDIT_SPOOL_MAX_RECORDS: '100',
      AUDIT_FLUSH_INTERVAL_MS: '60000',
      AUDIT_BATCH_MAX_RECORDS: '2000',
    });
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
  });

  const files: string[] = [];

  afterAll(async () => {
    await Promise.all(files.map((file) => rm(file, { force: true })));
    await closeTestDb();
  });

  const url = () => `${replica.url}/api/${org}/platform/workspaces`;
  const statusKey = (credential: string | null, status: number | null) => `${credential} ${status}`;

  it("keeps every record of the right caller and a bounded number of the flood's, whose counts add up", async () => {
    const started = Date.now();
    // The flood: 150 Basic logins of users that do not exist, 150 garbage Bearer tokens.
    const sent = new Map<string, number>();
    const floodOne = async (i: number) => {
      const basic = i % 2 === 0;
      const authorization = basic
        ? basicAuth({ username: `nobody-${randomBytes(6).toString('hex')}`, password: 'x' })
        : `Bearer ${randomBytes(48).toString('base64url')}`;
      const res = await requestFrom(FLOOD, url(), { headers: { authorization } });
      expect(res.status).toBeGreaterThanOrEqual(400);
      const key = statusKey(basic ? 'basic' : 'bearer', res.status);
      sent.set(key, (sent.get(key) ?? 0) + 1);
    };
    const flood = async (lane: number) => {
      for (let i = lane; i < 300; i += 10) await floodOne(i);
    };
    // The right caller, meanwhile: 20 calls, and two wrong passwords of its own.
    const callerIds: string[] = [];
    const caller = async () => {
      for (let i = 0; i < 22; i++) {
        const password = i % 10 === 5 ? 'wrong-password' : member.password;
        const res = await requestFrom(CALLER, url(), {
          headers: { authorization: basicAuth({ username: member.username, password }) },
        });
        expect(res.status).toBe(password === member.password ? 200 : 401);
        callerIds.push(String(res.headers['x-request-id']));
      }
    };
    await Promise.all([caller(), ...Array.from({ length: 10 }, (_, lane) => flood(lane))]);
    const elapsed = Date.now() - started;
    // Only the shutdown writes the spool (and the counts of the refusals not recorded).
    await replica.gateway.close();

    const rows = await testDb()<AuditRow>('audit_log').where({ org }).orderBy('seq');
    const log: AuditRecord[] = rows.map(recordOf);
    expect(verifyChain(log)).toBeUndefined();
    // The replicas of other files running meanwhile pull every organization's Keycloak events
    // into its log (their AUDIT_KEYCLOAK_EVENTS_SECONDS; this replica's pull is off): the
    // logins Keycloak saw, from the same addresses, are theirs to count, not this one's.
    const decisions = log.filter((r) => r.details.source !== 'keycloak');

    const callers = decisions.filter((r) => r.address === CALLER).map((r) => r.requestId);
    expect(callers.sort()).toEqual([...callerIds].sort());

    const flooded = decisions.filter((r) => r.address === FLOOD);
    // Each kind of refusal (credential, status, reason): its first ones, then one count per
    // window; the flood may have crossed the end of a window.
    const kinds = new Set(flooded.map((r) => `${statusKey(r.credential, r.status)} ${r.reason}`));
    const windows = 1 + Math.ceil(elapsed / REFUSAL_WINDOW_MS);
    expect(flooded.length).toBeLessThanOrEqual(
      kinds.size * windows * (REFUSALS_RECORDED_PER_WINDOW + 1),
    );
    const counted = new Map<string, number>();
    for (const record of flooded) {
      expect(record.outcome).toBe('failure');
      const key = statusKey(record.credential, record.status);
      const count = record.action === 'api.request' ? 1 : Number(record.details.count);
      counted.set(key, (counted.get(key) ?? 0) + count);
    }
    expect(Object.fromEntries(counted)).toEqual(Object.fromEntries(sent));
    expect(flooded.some((r) => r.action === 'api.request.summary')).toBe(true);
  });

  it('exports the summaries as JSON Lines that verify, as CSV and as OCSF', async () => {
    const reader = await createUser(org);
    await grantReaderRole(reader);
    const exported = async (format: string) => {
      const res = await fetch(
        `${testEnv().publicUrl}/api/${org}/platform/audit-log/export?format=${format}`,
        { headers: { authorization: basicAuth(reader) } },
      );
      expect(res.status).toBe(200);
      return res.text();
    };
    const file = path.join(os.tmpdir(), `realmgate-flood-${randomBytes(4).toString('hex')}.jsonl`);
    files.push(file);
    const jsonl = await exported('jsonl');
    await writeFile(file, jsonl);
    expect(await verifyExport(file)).toMatchObject({ org, firstSeq: 1 });
    expect(jsonl).toContain('"action":"api.request.summary"');
    expect(await exported('csv')).toMatch(/\napi\.request\.summary,|,api\.request\.summary,/);
    const summaries = (await exported('ocsf'))
      .split('\n')
      .filter((line) => line.includes('api.request.summary'))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(summaries.length).toBeGreaterThan(0);
    for (const event of summaries) {
      expect(event).toMatchObject({ class_uid: 3002, src_endpoint: { ip: FLOOD } });
      expect(event.count).toBeGreaterThan(0);
    }
  });
});
