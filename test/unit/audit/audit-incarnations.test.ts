import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAuditIncarnations } from '../../../src/audit/audit-incarnations.ts';
import { createOrganizationsRepo } from '../../../src/platform/organizations.repo.ts';
import { openEmbeddedDatabase } from '../../helpers/embedded-db.ts';

/**
 * The embedded database has one connection: an organization's record and its audit period are
 * made in one transaction (provisioning.service.ts), so the period's own transaction must run on
 * that transaction's connection, not wait for a second one that never comes.
 */
describe('an audit period begun within the transaction that makes the organization', () => {
  let db: Knex;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ db, close } = await openEmbeddedDatabase('audit-incarnations'));
  }, 120_000);
  afterAll(() => close());

  it('completes on the embedded database, once per record made', async () => {
    const incarnations = createAuditIncarnations(db);
    const create = () =>
      db.transaction(async (trx) => {
        const records = createOrganizationsRepo(trx);
        const made = await records.insertNew({ id: 'one-connection', name: 'One' });
        if (made) await incarnations.begin('one-connection', new Date(), trx);
        return made;
      });
    expect(await create()).toBe(true);
    expect(await create()).toBe(false);
    const periods = await db('audit_log_incarnations').where({ org: 'one-connection' });
    expect(periods).toHaveLength(1);
    expect(await incarnations.firstSeqOf('one-connection')).toBe(1);
  });
});
