import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyChain, type AuditRecord } from '../../src/audit/audit-chain.ts';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import {
  REFUSALS_RECORDED_PER_WINDOW,
  REFUSAL_WINDOW_MS,
} from '../../src/audit/refusal-summaries.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';
import { requestFrom } from '../helpers/from-address.ts';
import { createUser, passwordGrantBody, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';

const FLOOD = '127.0.0.2';
const CALLER = '127.0.0.1';

/**
 * One hostile address floods an organization's token endpoint through `/auth` with password
 * grants that fail (user names that do not exist, so no real account is locked), while a right
 * caller signs in from another address. As for a flood of refused `/api` requests
 * (audit-refusal-flood.test.ts), the replica holds its records until it stops in a spool of 100:
 * the flood must neither push the right caller's grants out of it nor make a row per failure.
 * Port 19764 (and 19765).
 */
describe('audit log under a flood of failed token grants', () => {
  let replica: Replica;
  let org: string;
  let member: TestUser;

  beforeAll(async () => {
    replica = await startReplica(19764, {
      AUDIT_SPOOL_MAX_RECORDS: '100',
      AUDIT_FLUSH_INTERVAL_MS: '60000',
      AUDIT_BATCH_MAX_RECORDS: '2000',
    });
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
  });

  afterAll(async () => {
    await closeTestDb();
  });

  const grant = (from: string, body: string) =>
    requestFrom(from, `${replica.url}/auth/realms/${org}/protocol/openid-connect/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body,
    });

  it("keeps every grant record of the right caller and a bounded number of the flood's, whose counts add up", async () => {
    const started = Date.now();
    // The flood: 300 password grants of users that do not exist (401, then 429 once the
    // address's login throttle holds).
    const sent = new Map<number, number>();
    const floodOne = async () => {
      const nobody = { username: `nobody-${randomBytes(6).toString('hex')}`, password: 'x' };
      const res = await grant(FLOOD, passwordGrantBody({ ...member, ...nobody }));
      expect(res.status).toBeGreaterThanOrEqual(400);
      sent.set(res.status, (sent.get(res.status) ?? 0) + 1);
    };
    const flood = async (lane: number) => {
      for (let i = lane; i < 300; i += 10) await floodOne();
    };
    // The right caller, meanwhile: 20 grants, and two wrong passwords of its own.
    const callerIds: string[] = [];
    const caller = async () => {
      for (let i = 0; i < 22; i++) {
        const password = i % 10 === 5 ? 'wrong-password' : member.password;
        const res = await grant(CALLER, passwordGrantBody({ ...member, password }));
        expect(res.status).toBe(password === member.password ? 200 : 401);
        callerIds.push(String(res.headers['x-request-id']));
      }
    };
    await Promise.all([caller(), ...Array.from({ length: 10 }, (_, lane) => flood(lane))]);
    const elapsed = Date.now() - started;
    // Only the shutdown writes the spool (and the counts of the failures not recorded).
    await replica.gateway.close();

    const rows = await testDb()<AuditRow>('audit_log').where({ org }).orderBy('seq');
    const log: AuditRecord[] = rows.map(recordOf);
    expect(verifyChain(log)).toBeUndefined();
    // The replicas of other files running meanwhile pull every organization's Keycloak events
    // into its log (their AUDIT_KEYCLOAK_EVENTS_SECONDS; this replica's pull is off): the
    // sign-ins Keycloak saw, from the same addresses, are theirs to count, not this one's.
    const grants = log.filter((r) => r.details.source !== 'keycloak');

    const callers = grants.filter((r) => r.address === CALLER);
    expect(callers.map((r) => r.requestId).sort()).toEqual([...callerIds].sort());
    expect(callers.filter((r) => r.outcome === 'success')).toHaveLength(20);

    const flooded = grants.filter((r) => r.address === FLOOD);
    // Each kind of failure (status and reason of one grant type): its first ones,
    // then one count per window; the flood may have crossed the end of a window.
    const kinds = new Set(flooded.map((r) => `${r.status} ${r.reason}`));
    const windows = 1 + Math.ceil(elapsed / REFUSAL_WINDOW_MS);
    expect(flooded.length).toBeLessThanOrEqual(
      kinds.size * windows * (REFUSALS_RECORDED_PER_WINDOW + 1),
    );
    const counted = new Map<number, number>();
    for (const record of flooded) {
      expect(record).toMatchObject({ outcome: 'failure', details: { grantType: 'password' } });
      // A summary names no client: it is not part of a failure's kind (the client chooses it).
      const summary = record.action === 'token.grant.summary';
      expect(record.clientId).toBe(summary ? null : apiClientIdOf(org));
      const count = record.action === 'token.grant' ? 1 : Number(record.details.count);
      counted.set(record.status!, (counted.get(record.status!) ?? 0) + count);
    }
    expect(Object.fromEntries(counted)).toEqual(Object.fromEntries(sent));
    expect(flooded.some((r) => r.action === 'token.grant.summary')).toBe(true);
  });
});
