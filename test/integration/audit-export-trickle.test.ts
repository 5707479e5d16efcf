import { randomBytes } from 'node:crypto';
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
import { tricklingGet } from '../helpers/stalled-get.ts';

/*
 * An export holds one of the few slots the process runs at once for as long as its client takes
 * to read it. A client that takes a little every so often is never silent for the answer
 * deadline, yet reads tens of MB at the pace of a drip: it must not keep the slot for hours. Here
 * it reads every 200 ms while the deadline is 10 s: no wait on it comes near the deadline (the
 * sockets' buffers refill in a few reads), but at that pace the export would take minutes, far
 * longer than the gateway takes to read its records, so the waits add up past the deadline. One slot, so the test
 * sees the slot's return in another organization's export. On a database of the test's own,
 * whose large log slows no other suite. Ports 21370/21371.
 */

const database = ownDatabase('trickle');
/** Records of the large log: its export (tens of MB) is far more than the sockets' buffers. */
const RECORDS = 200_000;
/** The client's pause between two reads: far below the deadline. */
const PAUSE_MS = 200;

describe('an export whose client reads it slowly', () => {
  const log = `trickle-${randomBytes(4).toString('hex')}`;
  let db: Knex;
  let replica: Replica;
  let other: string;
  let reader: TestUser;
  let admin: TestUser;
  let trickling: Socket | undefined;

  beforeAll(async () => {
    await database.create();
    replica = await startReplica(21370, {
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
    trickling?.destroy();
    await replica?.gateway.close();
    await db?.destroy();
    await database.drop();
  });

  const exportOfOther = () =>
    fetch(`${replica.url}/api/${other}/platform/audit-log/export?format=csv`, {
      headers: { authorization: basicAuth(reader) },
    });

  it('cuts it once the client has held it back for the deadline in all, and gives the slot back', async () => {
    // Warm: the reader's credentials checked once, not by each attempt.
    const first = await exportOfOther();
    expect(first.status).toBe(200);
    await first.text();
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
