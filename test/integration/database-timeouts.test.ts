import os from 'node:os';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../src/db/database-failures.ts';
import { openDatabase, runSpared } from '../../src/db/database.ts';
import { basicAuth } from '../helpers/api.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { ownDatabase } from '../helpers/postgres-server.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { startDatabaseRelay, type DatabaseRelay } from '../helpers/tcp-front.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * A PostgreSQL that accepts connections and never answers (a hung server, a path that drops
 * every packet): calls that need the database answer 503 `503-00003` within the configured
 * limits instead of waiting, and work again once it answers. On a database of the test's own:
 * the organizations it lists are none but its own, and the limits (a few seconds, which a loaded
 * machine's connection and list stay inside) are not timed here, only that they end the waits.
 * Ports 18870/18871 (replica), 18872 (relay).
 */
describe('platform database that accepts and never answers', () => {
  const database = ownDatabase('silent');
  let front: DatabaseRelay;
  let replica: Replica;
  let admin: TestUser;

  beforeAll(async () => {
    await database.create();
    front = await startDatabaseRelay(18872);
    replica = await startReplica(18870, {
      DATABASE_URL: database.url(`127.0.0.1:${front.port}`),
      DATABASE_CONNECT_TIMEOUT_MS: '2000',
      DATABASE_STATEMENT_TIMEOUT_MS: '3000',
    });
    admin = await createUser('master');
  });

  afterAll(async () => {
    front?.unsilence();
    await replica?.gateway.close();
    await front?.cut();
    await database.drop();
  });

  async function listOrganizations() {
    const res = await fetch(`${replica.url}/api/platform/organizations`, {
      headers: { authorization: basicAuth(admin) },
    });
    return { status: res.status, body: await res.json() };
  }

  it('answers 503 503-00003 on pooled and new connections while silent, and recovers', async () => {
    expect((await listOrganizations()).status).toBe(200);

    front.silence();
    const down = {
      status: 503,
      body: {
        data: null,
        result: '503-00003',
        message: 'The database is unavailable; retry later.',
      },
    };
    // The first on the connection the pool kept (no answer: dropped), the second on one it
    // cannot make (no answer to the sign-in). Without limits, each waited 60 s or for ever (a
    // hang fails the test by its timeout).
    expect(await listOrganizations()).toMatchObject(down);
    expect(await listOrganizations()).toMatchObject(down);

    front.unsilence();
    expect((await listOrganizations()).status).toBe(200);
  });
});

/**
 * The statement timeout cuts a request's query on the server (57014, mapped to 503), and
 * spares the work that legitimately runs long (runSpared): it runs past both the statement
 * timeout and the gateway's own wait for an answer.
 */
describe('statement timeout', () => {
  let db: Knex;

  beforeAll(async () => {
    db = await openDatabase({
      databaseUrl: testEnv().databaseUrl,
      dataDir: os.tmpdir(),
      // A connection made inside 2 s even on a loaded machine; a request's wait for an answer
      // is then 2.3 s, which the spared statement below outlasts.
      timeouts: { connectMs: 2000, statementMs: 300, sparedMs: 10_000 },
    });
  });

  afterAll(async () => {
    await db?.destroy();
  });

  it("cuts a request's long statement with 57014, which reads as the database unavailable", async () => {
    const failure: unknown = await db.raw('select pg_sleep(1)').then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toMatchObject({ code: '57014' });
    expect(isDatabaseUnavailable(failure)).toBe(true);
    // The connection stays usable.
    expect((await db.raw<{ rows: unknown[] }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
  });

  it('lets spared work run past the statement timeout and the wait for an answer', async () => {
    const slept = await runSpared(db, (trx) =>
      trx.raw<{ rows: unknown[] }>('select pg_sleep(3), 1 as one'),
    );
    expect(slept.rows).toMatchObject([{ one: 1 }]);
    // Spared for its transaction only: the connection is back under the limit.
    await expect(db.raw('select pg_sleep(1)')).rejects.toMatchObject({ code: '57014' });
  });
});
