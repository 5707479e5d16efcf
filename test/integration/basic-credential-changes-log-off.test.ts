import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { SETTLE_MS } from '../../src/audit/keycloak-event-pull.ts';
import { basicAuth } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, keycloakAdmin, sessionCount, userIdOf } from '../helpers/keycloak.ts';
import { createOrganization, migratedOwnDatabase } from '../helpers/platform.ts';
import { ownDatabase } from '../helpers/postgres-server.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { takeTurns } from '../helpers/turns.ts';

/**
 * The auth area's use of Keycloak's events does not depend on the audit log: with the log off
 * (its default), the replica still pulls each realm's events every AUDIT_KEYCLOAK_EVENTS_SECONDS,
 * so a password an administrator sets in Keycloak itself lets the jobs that use it in at the
 * next pull, not once the failed-login memory forgets their refusals. Nothing is written to
 * the audit log, and the log's own cursor is left where it was. The replica's clock is ahead so
 * that an event is taken about a second after Keycloak saved it. On a database of the suite's
 * own: the replica's rounds cover this suite's realm and master, not every organization other
 * suites made in the shared one.
 */
describe('Basic: credential changes made in Keycloak, the audit log off', () => {
  takeTurns('keycloak-event-pulls');
  const clock = aheadClock();
  clock.advance(SETTLE_MS - 1000);
  const database = ownDatabase('logoff');
  let db: Knex;
  let org: string;
  let replica: Replica;
  const statusOf = async (user: { username: string; password: string }) =>
    (
      await fetch(`${replica.url}/api/${org}/platform/workspaces`, {
        headers: { authorization: basicAuth(user) },
      })
    ).status;

  beforeAll(async () => {
    db = await migratedOwnDatabase(database);
    org = await createOrganization(['ws'], 0, db);
    replica = await startReplica(
      19990,
      {
        DATABASE_URL: database.url(),
        AUDIT_LOG_ENABLED: 'false',
        AUDIT_KEYCLOAK_EVENTS_SECONDS: '1',
      },
      undefined,
      clock,
    );
  });
  afterAll(async () => {
    await replica?.gateway.close();
    await db?.destroy();
    await database.drop();
  });

  it('takes a password refused just before once an administrator sets it in Keycloak, writing no record', async () => {
    // The replica's first pull makes the realm save its events, the log off too.
    const admin = await keycloakAdmin();
    await vi.waitFor(
      async () =>
        expect((await admin.realms.getConfigEvents({ realm: org })).eventsEnabled).toBe(true),
      { ...EVENTUALLY, interval: 200 },
    );
    // A fleet of jobs on a password the account does not have: refused by Keycloak once, then
    // from the failed-login memory (no new Keycloak session, no new check).
    const user = await createUser(org);
    const id = await userIdOf(user);
    const stale = { ...user, password: `${user.password}-stale` };
    expect(await statusOf(stale)).toBe(401);
    const sessions = await sessionCount(user);
    expect(await statusOf(stale)).toBe(401);
    // The administrator gives the account the jobs' password, in Keycloak's admin API directly.
    await admin.users.resetPassword({
      realm: org,
      id,
      credential: { type: 'password', value: stale.password, temporary: false },
    });
    // The failed-login memory would refuse it for 300 s: the pull ends that within seconds.
    await expect.poll(() => statusOf(stale), EVENTUALLY).toBe(200);
    expect(await sessionCount(user)).toBeGreaterThan(sessions);

    const kept: unknown[] = await db('audit_log').where({ org }).whereLike('action', 'keycloak.%');
    expect(kept).toEqual([]);
    // The log's cursor was not moved: a log turned on later takes these events.
    expect(await db('audit_keycloak_pulls').where({ realm: org })).toEqual([]);
  });
});
