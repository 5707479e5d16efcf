import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
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
import { stalledGet, tricklingGet } from '../helpers/stalled-get.ts';

/*
 * An export is written as its client takes it, holding a slot of the few the process runs at
 * once. Neither a client that takes the headers and then nothing more, its connection left open,
 * nor one that takes a little every so often (never silent for the answer deadline, yet reading
 * tens of MB at the pace of a drip) may keep the slot, and every organization's exports, for
 * hours. One slot here, so each test sees the slot's return in another organization's export, and
 * an answer deadline of 10 s: the drip (a read every 200 ms) is never held back near it at once,
 * but at that pace the export would take minutes, far longer than the gateway takes to read its
 * records, so its waits add up past it. On a database of the test's own, whose large log slows
 * no other suite. Ports 19648/19649.
 */

const database = ownDatabase('stall');
/** Records of the large log: its export (tens of MB) is far more than the sockets' buffers. */
const RECORDS = 200_000;
/** The slow client's pause between two reads: far below the deadline. */
const PAUSE_MS = 200;

describe('an export whose client stops reading, or reads it slowly', () => {
  const log = `stall-${randomBytes(4).toString('hex')}`;
  let db: Knex;
  let replica: Replica;
  let other: string;
  let reader: TestUser;
  let admin: TestUser;
  let stalled: Socket | undefined;
  let trickling: Socket | undefined;

  beforeAll(async () => {
    await database.create();
    replica = await startReplica(19648, {
      DATABASE_URL: database.url(),
      AUDIT_EXPORT_CONCURRENCY: '1',
      PROXY_ANSWER_DEADLINE_SECONDS: '10',
    });
    db = knex({ client: 'pg', connection: database.url(), pool: { min: 0, max: 2 } });
    other = await createOrganizationRealm();
    await createOrganizationsRepo(db).insertIfAbsent({ id: other, name: `Test ${other}` });
    [reader, admin] = await Promise.all([createUser(other), createUser('master')]);
    await grantReaderRole(reader);
    // A deleted organization's log kept for its retention: its records, and its head.
    await insertLargeLog(db, log, RECORDS);
  }, 120_000);

  afterAll(async () => {
    stalled?.destroy();
    trickling?.destroy();
    await replica?.gateway.close();
    await db?.destroy();
    await database.drop();
  });

  const exportOfOther = () =>
    fetch(`${replica.url}/api/${other}/platform/audit-log/export?format=csv`, {
      headers: { authorization: basicAuth(reader) },
    });

  it("gives the slot back once the client has taken nothing for the deadline: another organization's export runs", async () => {
    // Warm: the reader's credentials checked once, not by each attempt.
    const first = await exportOfOther();
    expect(first.status).toBe(200);
    await first.text();
    const held = await stalledGet(
      replica.url,
      `/api/platform/organizations/${log}/audit-log/export?format=csv`,
      basicAuth(admin),
    );
    expect(held.status).toBe(200);
    stalled = held.socket;
    // The only slot is the stalled export's until its deadline; then the other's export runs.
    await expect
      .poll(async () => {
        const res = await exportOfOther();
        await res.text();
        return res.status;
      }, EVENTUALLY)
      .toBe(200);
    // The stalled answer was ended, its connection closed: what it had not taken is lost.
    stalled.resume();
    await once(stalled, 'close');
  }, 180_000);

  it('cuts it once the client has held it back for the deadline in all, and gives the slot back', async () => {
    const slow = await tricklingGet(
      replica.url,
      `/api/platform/organizations/${log}/audit-log/export?format=csv`,
      basicAuth(admin),
      PAUSE_MS,
    );
    expect(slow.status).toBe(200);
    trickling = slow.socket;
    // Cut short by the gateway, though the client never stopped reading.
    expect(await slow.ended).toEqual({ whole: false });
    // Its slot is given back: the other organization's export runs.
    await expect
      .poll(async () => {
        const res = await exportOfOther();
        await res.text();
        return res.status;
      }, EVENTUALLY)
      .toBe(200);
  }, 600_000);
});
