import { randomBytes } from 'node:crypto';
import knex, { type Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrganizationsRepo } from '../../src/platform/organizations.repo.ts';
import { createWorkspacesRepo } from '../../src/platform/workspaces.repo.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import { insertLargeLog } from '../helpers/audit-records.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createOrganizationRealm, createUser, type TestUser } from '../helpers/keycloak.ts';
import { ownDatabase } from '../helpers/postgres-server.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';

/*
 * An audit export's chunk may scan far (a sparse filter over a large log) under the spared
 * timeout, holding a connection of the gateway's pool (10) all along: a few administrators'
 * exports at once must not leave the rest of the gateway waiting for one. On a database of the
 * test's own, whose large log slows no other suite. Ports 19762/19763.
 */

const database = ownDatabase('exports');
/** Records of the large log: a filter matching none of them scans them all, chunk after chunk. */
const RECORDS = 3_000_000;
/** The gateway's pool (database.ts). */
const POOL = 10;
const EXPORTS = 12;

/** What the test reads of the replica's pool (tarn's, as knex keeps it); not in knex's typings. */
interface TarnPool {
  max: number;
  numFree(): number;
  numUsed(): number;
  numPendingCreates(): number;
  on(event: 'acquireRequest', listener: () => void): void;
  removeListener(event: 'acquireRequest', listener: () => void): void;
}

describe('audit exports beside the rest of the gateway', () => {
  const log = `exports-${randomBytes(4).toString('hex')}`;
  let db: Knex;
  let replica: Replica;
  let other: string;
  let member: TestUser;
  let admin: TestUser;

  beforeAll(async () => {
    await database.create();
    replica = await startReplica(19762, { DATABASE_URL: database.url() });
    db = knex({ client: 'pg', connection: database.url(), pool: { min: 0, max: 2 } });
    other = await createOrganizationRealm(['ws1']);
    await createOrganizationsRepo(db).insertIfAbsent({ id: other, name: `Test ${other}` });
    await createWorkspacesRepo(db).insertIfAbsent({
      organizationId: other,
      id: 'ws1',
      name: 'Workspace ws1',
    });
    [member, admin] = await Promise.all([
      createUser(other, { workspaceRoles: ['ws1'] }),
      createUser('master'),
    ]);
    // A deleted organization's log kept for its retention: its records, and its head.
    await insertLargeLog(db, log, RECORDS);
    await db.raw('analyze audit_log');
  }, 120_000);

  afterAll(async () => {
    await replica?.gateway.close();
    await db?.destroy();
    await database.drop();
  });

  const workspaces = () =>
    callApi(`/api/${other}/platform/workspaces`, basicAuth(member), { base: replica.url });

  /**
   * The connections the replica's pool is asked for while `during` runs, and of those how many
   * found every connection lent or being made (`full`): such a request waits for one to be given
   * back. Read from the pool itself (tarn's `acquireRequest`, the replica runs in this process),
   * not from a stopwatch, which a loaded machine moves.
   */
  async function acquiresDuring<T>(during: () => Promise<T>) {
    const pool = (replica.gateway.db.client as { pool: TarnPool }).pool;
    let asked = 0;
    let full = 0;
    const onRequest = () => {
      asked += 1;
      if (pool.numFree() === 0 && pool.numUsed() + pool.numPendingCreates() >= pool.max) {
        full += 1;
      }
    };
    pool.on('acquireRequest', onRequest);
    try {
      const result = await during();
      return { result, asked, full };
    } finally {
      pool.removeListener('acquireRequest', onRequest);
    }
  }

  /** The export queries PostgreSQL is running for the replica now. */
  async function exportsRunning(): Promise<number> {
    const { rows } = await db.raw<{ rows: { running: string }[] }>(
      `select count(*) as running from pg_stat_activity
       where datname = ? and state = 'active' and query like '%actor_name%'`,
      [database.name],
    );
    return Number(rows[0]!.running);
  }

  it("answers another organization's list in its normal time while exports run", async () => {
    expect((await workspaces()).status).toBe(200);
    const auth = { authorization: basicAuth(admin) };
    // Warm: the administrator's credentials checked once, not by each export.
    expect(
      (
        await fetch(`${replica.url}/api/platform/organizations/${log}/audit-log?limit=1`, {
          headers: auth,
        })
      ).status,
    ).toBe(200);
    const answers: { status: number; body: string; retryAfter: string | null }[] = [];
    const exports = Array.from({ length: EXPORTS }, async () => {
      const res = await fetch(
        `${replica.url}/api/platform/organizations/${log}/audit-log/export?format=csv&actor=nobody`,
        { headers: auth },
      );
      const answer = {
        status: res.status,
        body: await res.text(),
        retryAfter: res.headers.get('retry-after'),
      };
      answers.push(answer);
      return answer;
    });
    // Every export either reading (as many as the pool lends at once) or answered.
    await expect
      .poll(async () => (await exportsRunning()) + answers.length, EVENTUALLY)
      .toBeGreaterThanOrEqual(POOL);
    const listed = await acquiresDuring(workspaces);
    expect(listed.result.status).toBe(200);
    // The list took its connections from the pool at once, never behind the exports' scans.
    expect(listed.asked).toBeGreaterThan(0);
    expect(listed.full).toBe(0);
    const settled = await Promise.all(exports);
    const done = settled.filter((a) => a.status === 200);
    const refused = settled.filter((a) => a.status !== 200);
    expect(done.length).toBeGreaterThanOrEqual(1);
    for (const answer of done) expect(answer.body.split('\r\n')).toHaveLength(2);
    for (const answer of refused) {
      expect(answer.status).toBe(429);
      expect(Number(answer.retryAfter)).toBeGreaterThan(0);
      expect(JSON.parse(answer.body)).toMatchObject({ result: '429-40001', data: null });
    }
    // The slots are given back: the next export runs.
    const again = await fetch(
      `${replica.url}/api/platform/organizations/${log}/audit-log/export?format=csv&actor=nobody`,
      { headers: auth },
    );
    expect(again.status).toBe(200);
    await again.text();
  }, 180_000);
});
