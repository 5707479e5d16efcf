import knex, { type Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrganizationsRepo } from '../../src/platform/organizations.repo.ts';
import { createWorkspacesRepo } from '../../src/platform/workspaces.repo.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createOrganizationRealm, createUser, type TestUser } from '../helpers/keycloak.ts';
import { ownDatabase } from '../helpers/postgres-server.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';

/*
 * A page of the audit log is read in one transaction, each statement up to the statement
 * timeout: readers that find the log slow (a filter scanning a large log; here, a lock the test
 * holds on the table) must not hold every connection of the gateway's pool (10) while another
 * organization's request waits for one. On a database of the test's own, whose lock holds up no
 * other suite. Ports 19646/19647.
 */

const database = ownDatabase('reads');
/** Three times the pool: were each given a connection, the ones queued would outlast a wait. */
const READS = 30;

describe('audit log reads beside the rest of the gateway', () => {
  let db: Knex;
  let replica: Replica;
  let other: string;
  let member: TestUser;
  let admin: TestUser;

  beforeAll(async () => {
    await database.create();
    // A request waits for a connection no longer than a statement may run (plus the connect
    // timeout, its default 5 s: the reads open the pool's connections, and on a loaded machine
    // one took longer than a tighter bound, 503). A minute here: the reads behind the test's
    // lock must outlast the time a loaded machine takes to send them all and list the
    // workspaces, while a request queued behind them would still fail the test, only later.
    replica = await startReplica(19646, {
      DATABASE_URL: database.url(),
      DATABASE_STATEMENT_TIMEOUT_MS: '60000',
    });
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
  }, 120_000);

  afterAll(async () => {
    await replica?.gateway.close();
    await db?.destroy();
    await database.drop();
  });

  const workspaces = () =>
    callApi(`/api/${other}/platform/workspaces`, basicAuth(member), { base: replica.url });

  /** Requests of the replica waiting for a connection of its pool now. */
  async function waitingForConnection(): Promise<number> {
    const res = await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/metrics`);
    const line = /^realmgate_database_connections\{state="pending"\} (\d+)$/m.exec(
      await res.text(),
    );
    return Number(line?.[1] ?? 0);
  }

  /** The page reads PostgreSQL holds behind the test's lock now. */
  async function readsBlocked(): Promise<number> {
    const { rows } = await db.raw<{ rows: { blocked: string }[] }>(
      `select count(*) as blocked from pg_stat_activity
       where datname = ? and wait_event_type = 'Lock' and query like 'select%audit_log%'`,
      [database.name],
    );
    return Number(rows[0]!.blocked);
  }

  it("answers another organization's list while many reads of a slow log wait", async () => {
    // Warm: each caller's credentials checked once, not by each request.
    expect((await workspaces()).status).toBe(200);
    const auth = { authorization: basicAuth(admin) };
    const read = () => fetch(`${replica.url}/api/platform/audit-log?limit=1`, { headers: auth });
    expect((await read()).status).toBe(200);
    const lock = await db.transaction();
    await lock.raw('lock table audit_log in access exclusive mode');
    const answers: { status: number; body: string; retryAfter: string | null }[] = [];
    const reads = Array.from({ length: READS }, async () => {
      const res = await read();
      const answer = {
        status: res.status,
        body: await res.text(),
        retryAfter: res.headers.get('retry-after'),
      };
      answers.push(answer);
      return answer;
    });
    let listed: Awaited<ReturnType<typeof workspaces>>;
    try {
      // Every read answered, behind the lock, or waiting for a connection.
      await expect
        .poll(
          async () => answers.length + (await readsBlocked()) + (await waitingForConnection()),
          EVENTUALLY,
        )
        .toBeGreaterThanOrEqual(READS);
      listed = await workspaces();
    } finally {
      await lock.rollback();
    }
    expect(listed.status).toBe(200);
    const settled = await Promise.all(reads);
    const done = settled.filter((a) => a.status === 200);
    const refused = settled.filter((a) => a.status !== 200);
    expect(done.length).toBeGreaterThanOrEqual(1);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    for (const answer of refused) {
      expect(answer.status).toBe(429);
      expect(Number(answer.retryAfter)).toBeGreaterThan(0);
      expect(JSON.parse(answer.body)).toMatchObject({ result: '429-40001', data: null });
    }
    // The slots are given back: the next read runs.
    expect((await read()).status).toBe(200);
  }, 180_000);
});
