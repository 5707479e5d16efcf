import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeycloakEventCursors } from '../../../src/audit/keycloak-event-cursors.ts';
import { openEmbeddedDatabase } from '../../helpers/embedded-db.ts';

/**
 * A realm's lease kept while its pull waits (for the audit writer's flush): renewed only by the
 * holder that still has it. A lease that ran out and was taken by another replica, even one
 * since given back, is lost for good: the other replica may have moved the cursors meanwhile.
 */
describe('renewing a realm’s lease of Keycloak event pulls', () => {
  let db: Knex;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ db, close } = await openEmbeddedDatabase('keycloak-event-cursors'));
  }, 120_000);
  afterAll(() => close());

  const untilOf = async (realm: string) =>
    ((await db('audit_keycloak_pulls').where({ realm }).first()) as { lease_until: Date })
      .lease_until;
  const none = { timeMs: undefined, ids: [] };

  it('extends the lease of its holder, and keeps others out', async () => {
    const cursors = createKeycloakEventCursors(db, 'audit');
    expect(await cursors.claim('org-held', 'a', 1_000)).toBeDefined();
    const claimed = await untilOf('org-held');
    expect(await cursors.renew('org-held', 'a', 60_000)).toBe(true);
    expect((await untilOf('org-held')).getTime()).toBeGreaterThan(claimed.getTime() + 30_000);
    expect(await cursors.renew('org-held', 'b', 60_000)).toBe(false);
    expect(await cursors.claim('org-held', 'b', 60_000)).toBeUndefined();
  });

  it('tells a holder whose lease ran out and was taken that it lost it, also once given back', async () => {
    const cursors = createKeycloakEventCursors(db, 'audit');
    expect(await cursors.claim('org-lost', 'a', -1_000)).toBeDefined();
    expect(await cursors.claim('org-lost', 'b', 60_000)).toBeDefined();
    expect(await cursors.renew('org-lost', 'a', 60_000)).toBe(false);
    const moved = { user: { timeMs: 10, ids: ['u1'] }, admin: none };
    expect(await cursors.saveAndRelease('org-lost', 'b', moved)).toBe(true);
    expect(await cursors.renew('org-lost', 'a', 60_000)).toBe(false);
    expect(await cursors.saveAndRelease('org-lost', 'a', { user: none, admin: none })).toBe(false);
    expect((await cursors.claim('org-lost', 'c', 60_000))?.user).toEqual(moved.user);
  });

  it('keeps a lease that ran out while nobody took it', async () => {
    const cursors = createKeycloakEventCursors(db, 'auth');
    expect(await cursors.claim('org-late', 'a', -1_000)).toBeDefined();
    expect(await cursors.renew('org-late', 'a', 60_000)).toBe(true);
    expect(await cursors.claim('org-late', 'b', 60_000)).toBeUndefined();
  });
});
