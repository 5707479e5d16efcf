import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyChain } from '../../src/audit/audit-chain.ts';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import { createAuditWriter, type AuditEvent } from '../../src/audit/audit-writer.ts';
import { apiEvent } from '../helpers/audit-records.ts';
import { loggerToLines } from '../helpers/log-lines.ts';
import { closeTestDb, testDb } from '../helpers/platform.ts';

/**
 * A record PostgreSQL can never take (a log's name longer than its index holds: 54000; a
 * number out of its column's range: 22003) must not hold back the records behind it: the batch
 * holding it is refused whole, so the writer writes the others and loses that one, counted and
 * logged, instead of trying the same batch for ever while the spool fills. The test database.
 */
/** A writer of batches of 10 that flushes when told, counting what it writes and loses. */
function countingWriter() {
  const counts = { written: 0, lost: 0 };
  const { logger, lines } = loggerToLines();
  const writer = createAuditWriter({
    db: testDb(),
    logger,
    metrics: { auditRecords: (outcome, n) => (counts[outcome] += n) },
    spoolMax: 1000,
    batchMax: 10,
    intervalMs: 60_000,
  });
  return { writer, counts, lines };
}

describe('audit writer: a record the database refuses for good', () => {
  afterAll(() => closeTestDb());

  it('writes the records of its batch and after it, in order, and counts it lost', async () => {
    const { writer, counts, lines } = countingWriter();
    const orgs = [0, 1].map(() => `refused${randomBytes(5).toString('hex')}`);
    const secretish = `name-${randomBytes(6).toString('hex')}`;
    const at = Date.now();
    const events: AuditEvent[] = Array.from({ length: 25 }, (_, n) =>
      apiEvent(orgs[n % 2]!, at + n, { details: { n: String(n) } }),
    );
    // Random: a repeated character compresses to an index entry the database takes.
    events[7] = apiEvent(randomBytes(1500).toString('hex'), at + 7, { actorName: secretish });
    events[13] = apiEvent(orgs[1]!, at + 13, { status: 2 ** 40, actorName: secretish });
    for (const event of events) writer.record(event);

    await writer.flush();

    expect(counts).toEqual({ written: 23, lost: 2 });
    expect((await writer.readiness()).details).toEqual({ spooled: 0, lost: 2 });
    for (const [i, org] of orgs.entries()) {
      const records = (await testDb()<AuditRow>('audit_log').where({ org }).orderBy('seq')).map(
        recordOf,
      );
      const expected = events
        .map((_, n) => n)
        .filter((n) => n % 2 === i && n !== 7 && n !== 13)
        .map(String);
      expect(records.map((r) => r.details.n)).toEqual(expected);
      expect(records.map((r) => r.seq)).toEqual(records.map((_, k) => k + 1));
      expect(verifyChain(records)).toBeUndefined();
    }
    const refusals = lines.filter((line) => line.includes('refused'));
    expect(refusals.join('')).toContain('54000');
    expect(refusals.join('')).toContain('22003');
    expect(lines.join('')).not.toContain(secretish);
    await writer.close(1000);
  });

  it('goes back to full batches once the record refused is found and lost', async () => {
    const written: number[] = [];
    const writer = createAuditWriter({
      db: testDb(),
      logger: loggerToLines().logger,
      metrics: { auditRecords: (outcome, n) => outcome === 'written' && written.push(n) },
      spoolMax: 1000,
      batchMax: 10,
      intervalMs: 60_000,
    });
    const org = `refused${randomBytes(5).toString('hex')}`;
    const at = Date.now();
    // The first of its batch: halved down to it alone, then the others in batches as large as
    // they come (the tenth record started a run of ten, which has 9 left), not the rest of its
    // batch one record a transaction.
    writer.record(apiEvent(org, at, { status: 2 ** 40 }));
    for (let n = 1; n < 25; n++) writer.record(apiEvent(org, at + n));

    await writer.flush();

    expect(written).toEqual([9, 10, 5]);
    await writer.close(1000);
  });

  it('loses a record no row can be made of (a time past what a Date holds) like one refused', async () => {
    const { writer, counts, lines } = countingWriter();
    const org = `unmade${randomBytes(5).toString('hex')}`;
    const at = Date.now();
    const events: AuditEvent[] = Array.from({ length: 25 }, (_, n) =>
      apiEvent(org, at + n, { details: { n: String(n) } }),
    );
    // A Keycloak event's time is Keycloak's: `new Date(it).toISOString()` throws a RangeError.
    // First of a batch, and within one.
    events[0] = apiEvent(org, 8.64e15 + 1, { action: 'keycloak.login' });
    events[13] = apiEvent(org, -8.64e15 - 1, { action: 'keycloak.logout' });
    for (const event of events) writer.record(event);

    await writer.flush();

    expect(counts).toEqual({ written: 23, lost: 2 });
    expect((await writer.readiness()).details).toEqual({ spooled: 0, lost: 2 });
    const records = (await testDb()<AuditRow>('audit_log').where({ org }).orderBy('seq')).map(
      recordOf,
    );
    const kept = events.filter((_, n) => n !== 0 && n !== 13);
    expect(records.map((r) => r.details.n)).toEqual(kept.map((e) => e.details.n));
    expect(records.map((r) => r.at)).toEqual(kept.map((e) => new Date(e.atMs).toISOString()));
    expect(verifyChain(records)).toBeUndefined();
    const lostLines = lines.filter((line) => line.includes('lost'));
    expect(lostLines.join('')).toContain('keycloak.login');
    expect(lostLines.join('')).toContain('keycloak.logout');
    await writer.close(1000);
  });
});
