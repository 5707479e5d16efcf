import type { Socket } from 'node:net';
import knex, { type Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrganizationsRepo } from '../../src/platform/organizations.repo.ts';
import { basicAuth } from '../helpers/api.ts';
import { grantReaderRole } from '../helpers/audit-readers.ts';
import { insertLargeLog } from '../helpers/audit-records.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createOrganizationRealm, createUser, type TestUser } from '../helpers/keycloak.ts';
import { ownDatabase } from '../helpers/postgres-server.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { stalledGet } from '../helpers/stalled-get.ts';

/*
 * Exports hold their slots for as long as their clients take to read them, up to minutes; a page
 * of the log is a short read an administrator expects answered meanwhile. Exports of two
 * organizations whose clients take none of them must not leave every organization's page reads
 * refused until the answer deadline (300 s) cuts them, and a client that goes gives its slot back
 * at once. On a database of the test's own, whose large log slows no other suite.
 * Ports 19682/19683.
 */

const database = ownDatabase('pagereads');
/** Records of the large log: its export (tens of MB) is far more than the sockets' buffers. */
const RECORDS = 200_000;

describe('page reads of the audit log while exports are held', () => {
  let db: Knex;
  let replica: Replica;
  let exporting: string;
  let reader: TestUser;
  let bystander: TestUser;
  let admin: TestUser;
  const held: Socket[] = [];

  beforeAll(async () => {
    await database.create();
    replica = await startReplica(19682, {
      DATABASE_URL: database.url(),
      AUDIT_EXPORT_CONCURRENCY: '4',
      PROXY_ANSWER_DEADLINE_SECONDS: '300',
    });
    db = knex({ client: 'pg', connection: database.url(), pool: { min: 0, max: 2 } });
    const [one, two] = await Promise.all([createOrganizationRealm(), createOrganizationRealm()]);
    exporting = one;
    for (const id of [one, two]) {
      await createOrganizationsRepo(db).insertIfAbsent({ id, name: `Test ${id}` });
    }
    [reader, bystander, admin] = await Promise.all([
      createUser(one),
      createUser(two),
      createUser('master'),
    ]);
    await Promise.all([grantReaderRole(reader), grantReaderRole(bystander)]);
    // The exporting organization's log, large: each export of it outlasts its client's buffers.
    await insertLargeLog(db, one, RECORDS);
  }, 120_000);

  afterAll(async () => {
    for (const socket of held) socket.destroy();
    await replica?.gateway.close();
    await db?.destroy();
    await database.drop();
  });

  const page = (path: string, user: TestUser) =>
    fetch(`${replica.url}${path}?limit=1`, { headers: { authorization: basicAuth(user) } });
  /** A page of each log read by its readers, one after another as an administrator would. */
  async function pages(): Promise<number[]> {
    const statuses: number[] = [];
    for (const [path, user] of [
      [`/api/${exporting}/platform/audit-log`, reader],
      [`/api/${bystander.realm}/platform/audit-log`, bystander],
      ['/api/platform/audit-log', admin],
    ] as const) {
      const res = await page(path, user);
      await res.text();
      statuses.push(res.status);
    }
    return statuses;
  }
  const smallExport = () =>
    fetch(`${replica.url}/api/${bystander.realm}/platform/audit-log/export?format=csv`, {
      headers: { authorization: basicAuth(bystander) },
    });

  /**
   * Platform administrators' exports of the large log, then its own reader's, each left unread
   * once its head came: the slots they are given stay theirs. Answers each one's status.
   */
  async function holdExports(): Promise<number[]> {
    const statuses: number[] = [];
    const attempts: [string, TestUser][] = [
      [`/api/platform/organizations/${exporting}/audit-log/export?format=csv`, admin],
      [`/api/platform/organizations/${exporting}/audit-log/export?format=csv`, admin],
      [`/api/platform/organizations/${exporting}/audit-log/export?format=csv`, admin],
      [`/api/${exporting}/platform/audit-log/export?format=csv`, reader],
    ];
    for (const [path, user] of attempts) {
      const { status, socket } = await stalledGet(replica.url, path, basicAuth(user));
      statuses.push(status);
      if (status === 200) held.push(socket);
      else socket.destroy();
    }
    return statuses;
  }

  let firstRound: number[];

  it("answers every organization's page reads while two organizations' exports are held unread", async () => {
    // Warm: each caller's credentials checked once, not by each attempt.
    expect(await pages()).toEqual([200, 200, 200]);
    firstRound = await holdExports();
    // Each organization exports: the platform administrators' and the organization's own.
    expect(firstRound.slice(0, 3)).toContain(200);
    expect(firstRound[3]).toBe(200);
    for (const status of firstRound) expect([200, 429]).toContain(status);
    expect(await pages()).toEqual([200, 200, 200]);
  }, 180_000);

  it('gives an export its slot back once its client goes, long before the answer deadline', async () => {
    // Every slot exports may take is held: a third organization's export waits its turn.
    const refused = await smallExport();
    expect(refused.status).toBe(429);
    await refused.text();
    for (const socket of held.splice(0)) socket.destroy();
    await expect
      .poll(async () => {
        const res = await smallExport();
        await res.text();
        return res.status;
      }, EVENTUALLY)
      .toBe(200);
    // Every held slot came back: the same exports are given as many again.
    await expect
      .poll(async () => {
        const again = await holdExports();
        for (const socket of held.splice(0)) socket.destroy();
        return again;
      }, EVENTUALLY)
      .toEqual(firstRound);
  }, 180_000);
});
