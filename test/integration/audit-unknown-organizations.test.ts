import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuditRecord } from '../../src/audit/audit-chain.ts';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import { basicAuth } from '../helpers/api.ts';
import { requestFrom } from '../helpers/from-address.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { startDatabaseRelay, type DatabaseRelay } from '../helpers/tcp-front.ts';

const CALLER = '127.0.0.1';
const NAMER = '127.0.0.23';

/**
 * While the database is down, an `/api` request naming an organization this replica never saw
 * cannot be told apart from one naming an organization that exists: it is refused 503. Anyone
 * can name a thousand made-up organizations so: their refusals must not each make a log (a head
 * row and a chain) once the database is back; they go to master's log, as a refusal of an
 * organization known not to exist does. A refusal of an organization the replica knows is
 * still that organization's. Ports 19950-19951, relay 19953.
 */
describe('audit log: refusals naming organizations not known to exist, the database down', () => {
  let relay: DatabaseRelay;
  let replica: Replica | undefined;
  let org: string;
  let member: TestUser;

  beforeAll(async () => {
    relay = await startDatabaseRelay(19953);
    replica = await startReplica(19950, { DATABASE_URL: relay.databaseUrl });
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
  });

  afterAll(async () => {
    await relay?.restore().catch(() => undefined);
    await replica?.gateway.close();
    await relay?.cut();
    await closeTestDb();
  });

  const url = (organization: string) => `${replica!.url}/api/${organization}/platform/workspaces`;

  it("keeps made-up organizations' refusals in master's log, a known organization's in its own", async () => {
    // Known to this replica before the outage.
    const known = await requestFrom(CALLER, url(org), {
      headers: { authorization: basicAuth(member) },
    });
    expect(known.status).toBe(200);
    // The shared database keeps earlier runs' records from this address: this run's only.
    const since = new Date().toISOString();
    await relay.cut();

    const madeUp = Array.from({ length: 30 }, () => `nosuch${randomBytes(5).toString('hex')}`);
    for (const id of madeUp) {
      const res = await requestFrom(NAMER, url(id), {
        headers: { authorization: `Bearer ${randomBytes(24).toString('base64url')}` },
      });
      expect(res.status).toBe(503);
    }
    // A refusal of the known organization, at its credentials (a garbage token).
    const refused = await requestFrom(NAMER, url(org), {
      headers: { authorization: `Bearer ${randomBytes(24).toString('base64url')}` },
    });
    expect(refused.status).toBe(401);

    await relay.restore();
    // Its shutdown writes its spool, the database back.
    await replica!.gateway.close();
    replica = undefined;

    const heads = await testDb()('audit_log_heads').whereIn('org', madeUp).pluck<string[]>('org');
    expect(heads).toEqual([]);
    const rows = await testDb()<AuditRow>('audit_log')
      .whereIn('org', madeUp)
      .count<{ count: string | number }[]>({ count: '*' });
    expect(Number(rows[0]!.count)).toBe(0);

    // Every one of them is in master's log: recorded one by one, or counted in a summary.
    const master: AuditRecord[] = (
      await testDb()<AuditRow>('audit_log').where({ org: 'master' }).orderBy('seq')
    )
      .map(recordOf)
      .filter((r) => r.address === NAMER && r.at >= since);
    const counted = master.reduce(
      (sum, r) => sum + (r.action === 'api.request' ? 1 : Number(r.details.count)),
      0,
    );
    expect(counted).toBe(madeUp.length);
    for (const record of master.filter((r) => r.action === 'api.request')) {
      expect(madeUp).toContain(record.details.organization);
      // As answered: the database was unavailable (not an unexpected error).
      expect(record).toMatchObject({
        status: 503,
        outcome: 'failure',
        result: '503-00003',
        reason: 'databaseUnavailable',
      });
    }

    const theirs = (await testDb()<AuditRow>('audit_log').where({ org }).orderBy('seq'))
      .map(recordOf)
      .filter((r) => r.address === NAMER);
    expect(theirs.map((r) => [r.action, r.status, r.requestId])).toEqual([
      ['api.request', 401, refused.headers['x-request-id']],
    ]);
  });
});
