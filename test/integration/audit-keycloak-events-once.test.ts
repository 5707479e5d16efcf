import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyChain } from '../../src/audit/audit-chain.ts';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import { createAuditWriter, type AuditEvent } from '../../src/audit/audit-writer.ts';
import { createLogger } from '../../src/http/logger.ts';
import { apiEvent } from '../helpers/audit-records.ts';
import { closeTestDb, testDb } from '../helpers/platform.ts';

/**
 * Two writers (two replicas) whose spools hold the same pulled Keycloak events write them at
 * the same moment into the real PostgreSQL, on connections of their own: a replica cut off from
 * the database past its pull's lease, and the one that pulled the events again meanwhile. Each
 * event is in the log once, the log one chain, from its very first record (no head yet).
 */
describe('audit log: a Keycloak event two spools hold, written at once by both', () => {
  afterAll(async () => {
    await closeTestDb();
  });

  it('is written once, whichever writer gets the lock first', async () => {
    const org = `twice-${randomBytes(4).toString('hex')}`;
    const pulled = (round: number, n: number): AuditEvent =>
      apiEvent(org, Date.UTC(2026, 10, 1, round) + n, {
        action: 'keycloak.login',
        credential: null,
        details: { source: 'keycloak', keycloakEventId: `kc-${round}-${n}` },
      });
    const spec = {
      db: testDb(),
      logger: createLogger('silent'),
      metrics: { auditRecords: () => undefined },
      spoolMax: 1000,
      batchMax: 1000,
      intervalMs: 60_000,
    };
    const writers = [createAuditWriter(spec), createAuditWriter(spec)];
    for (let round = 0; round < 5; round++) {
      for (const [w, writer] of writers.entries()) {
        writer.record(apiEvent(org, Date.now(), { requestId: `own-${round}-${w}` }));
        for (let n = 0; n < 40; n++) writer.record(pulled(round, n));
      }
      await Promise.all(writers.map((writer) => writer.flush()));
    }
    const rows = await testDb()<AuditRow>('audit_log').where({ org }).orderBy('seq');
    const records = rows.map(recordOf);
    const ids = records.flatMap((r) => (r.details.keycloakEventId as string | undefined) ?? []);
    expect(ids).toHaveLength(5 * 40);
    expect(new Set(ids).size).toBe(5 * 40);
    expect(records.filter((r) => r.action === 'api.request')).toHaveLength(5 * 2);
    expect(verifyChain(records)).toBeUndefined();
    await Promise.all(writers.map((writer) => writer.close(1000)));
  });
});
