import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  fromEveryWorker,
  startTwoWorkers,
  type ClusteredGateway,
} from '../helpers/clustered-gateway.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, grantAtKeycloak, type TestUser } from '../helpers/keycloak.ts';
import { loggerToRecords } from '../helpers/log-lines.ts';
import { startPostgresProcess, type PostgresProcess } from '../helpers/postgres-process.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import {
  startDatabaseRelay,
  startTcpFront,
  type DatabaseRelay,
  type KeycloakRelay,
  type TcpFront,
} from '../helpers/tcp-front.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * A replica that starts while its PostgreSQL is unreachable (restarted during a database
 * outage: a node drained, a rolling update, an OOM kill) starts all the same, as ready as a
 * running replica that lost the database: it serves what needs no database, answers 503
 * `503-00003` for what does, and migrates in the background; once PostgreSQL answers it is fully
 * ready, without a restart. A PostgreSQL of this suite's own, empty, so the migration runs then.
 * Ports 19780/19781 (the replica), 19782 (PostgreSQL); 19784/19785 (a replica started while
 * Redis is unreachable), 19786 (where no Redis listens).
 */
describe('a replica started while PostgreSQL is unreachable', () => {
  let postgres: PostgresProcess;
  let replica: Replica | undefined;
  let withoutRedis: Replica | undefined;
  let admin: TestUser;

  beforeAll(async () => {
    postgres = await startPostgresProcess(19782);
    await postgres.stop();
    admin = await createUser('master');
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await withoutRedis?.gateway.close();
    await postgres?.destroy();
  });

  async function call(path: string, authorization: string) {
    const res = await fetch(`${replica!.url}${path}`, { headers: { authorization } });
    return {
      status: res.status,
      retryAfter: res.headers.get('retry-after'),
      body: (await res.json()) as { result?: string; data?: unknown; message?: string },
    };
  }

  async function readyz(adminPort?: number) {
    const url = adminPort === undefined ? replica!.url : `http://127.0.0.1:${adminPort}`;
    const res = await fetch(`${url}/readyz`);
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  it('starts, serves what needs no database, and is fully ready once PostgreSQL answers', async () => {
    // A session the fleet saw before (here the suite's gateway, on the shared Redis): its reach
    // is served from Redis while the database is down, as on a running replica.
    const bearer = `Bearer ${await grantAtKeycloak(admin)}`;
    const seen = await fetch(`${testEnv().publicUrl}/api/platform/token-lifetimes`, {
      headers: { authorization: bearer },
    });
    expect(seen.status).toBe(200);
    replica = await startReplica(19780, {
      DATABASE_URL: `${postgres.url}/postgres`,
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: testEnv().redisKeyPrefix,
    });

    // In rotation, as a running replica that lost the database is.
    expect(await readyz()).toMatchObject({
      status: 200,
      body: {
        data: { database: 'down', keycloak: 'up', cache: 'up' },
        message: 'Degraded: database.',
      },
    });
    expect((await fetch(`${replica.url}/healthz`)).status).toBe(200);
    // A verified token of a known session, on a route that reads Keycloak only.
    expect(await call('/api/platform/token-lifetimes', bearer)).toMatchObject({ status: 200 });
    // What needs the database answers 503 in the envelope.
    expect(await call('/api/platform/organizations', bearer)).toMatchObject({
      status: 503,
      retryAfter: '5',
      body: { data: null, result: '503-00003' },
    });

    await postgres.start();
    // Fully ready: the audit records of the outage written too (the admin listener names each
    // part's details).
    await expect
      .poll(async () => (await readyz(replica!.config.ADMIN_PORT)).body, EVENTUALLY)
      .toMatchObject({
        message: 'SUCCESS',
        data: { database: 'up', audit_log: { status: 'up', lost: 0 } },
      });
    // Migrated in the background: the empty database now holds the schema.
    expect(await call('/api/platform/organizations', bearer)).toMatchObject({
      status: 200,
      body: { data: [] },
    });
  });

  it('starts while Redis is unreachable too, and serves from its own memory', async () => {
    withoutRedis = await startReplica(19784, { REDIS_URL: 'redis://127.0.0.1:19786' });
    const bearer = `Bearer ${await grantAtKeycloak(admin)}`;
    const ready = await fetch(`${withoutRedis.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({
      data: { cache: 'degraded', database: 'up', keycloak: 'up' },
    });
    const listed = await fetch(`${withoutRedis.url}/api/platform/organizations`, {
      headers: { authorization: bearer },
    });
    expect(listed.status).toBe(200);
  });
});

/**
 * PostgreSQL answers again while the migration in the background waits out its backoff (up to
 * 10 s): until the schema is current, what needs the database still answers 503 in the envelope
 * (the tables may not be there yet), and the readiness check that sees the database answer
 * starts the migration at once. An empty PostgreSQL of this suite's own (port 19772) behind a
 * relay (19773) the test cuts and restores at once; the replica on 19770/19771.
 */
describe('a replica whose PostgreSQL answers again before its migration is tried again', () => {
  let postgres: PostgresProcess;
  let relay: TcpFront;
  let replica: Replica | undefined;
  let admin: TestUser;
  const { logger, records: lines } = loggerToRecords();
  const logged = (matches: (line: Record<string, unknown>) => boolean) =>
    expect.poll(() => lines.some(matches), EVENTUALLY).toBe(true);

  beforeAll(async () => {
    postgres = await startPostgresProcess(19772);
    relay = await startTcpFront(19773, { host: '127.0.0.1', port: 19772 });
    await relay.cut();
    admin = await createUser('master');
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await relay?.cut();
    await postgres?.destroy();
  });

  it('answers 503 until its schema is current, and migrates once readiness sees the database', async () => {
    replica = await startReplica(
      19770,
      { DATABASE_URL: `postgres://postgres@127.0.0.1:${relay.port}/postgres` },
      logger,
    );
    // The attempts so far failed; the next one waits 8 s (0.5 s doubling).
    await logged((l) => l.msg === 'database: still unreachable' && l.attempts === 5);
    await relay.restore();

    const bearer = `Bearer ${await grantAtKeycloak(admin)}`;
    const listed = await fetch(`${replica.url}/api/platform/organizations`, {
      headers: { authorization: bearer },
    });
    expect({ status: listed.status, body: await listed.json() }).toMatchObject({
      status: 503,
      body: { data: null, result: '503-00003' },
    });
    const ready = await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/readyz`);
    expect(await ready.json()).toMatchObject({
      data: { database: { status: 'down', schema: 'not migrated yet' } },
    });

    // That readiness check saw the database answer: the migration ran then, not 8 s later.
    await logged((l) => l.msg === 'database: answering; schema current');
    expect(lines.find((l) => l.msg === 'database: answering; schema current')).toMatchObject({
      trigger: 'the database answered',
    });
    const again = await fetch(`${replica.url}/api/platform/organizations`, {
      headers: { authorization: bearer },
    });
    expect(again.status).toBe(200);
  });
});

/**
 * With workers, the supervising process migrates before any worker: with PostgreSQL unreachable
 * it starts the workers all the same and migrates once the database answers. Ports 19790-19791
 * (the gateway), 19795 (Keycloak's relay), 19796 (the database's relay).
 */
describe('a gateway of two workers started while PostgreSQL is unreachable', () => {
  let database: DatabaseRelay | undefined;
  let keycloak: KeycloakRelay | undefined;
  let gateway: ClusteredGateway | undefined;

  afterAll(async () => {
    await gateway?.stop();
    await keycloak?.cut();
    await database?.cut();
  });

  it('starts its workers, ready (degraded), and migrates once the database answers', async () => {
    database = await startDatabaseRelay(19796);
    await database.cut();
    ({ gateway, keycloak } = await startTwoWorkers(19790, { DATABASE_URL: database.databaseUrl }));
    const ready = await fromEveryWorker(() => gateway!.send('/readyz'));
    expect(ready.map((a) => [a.status, JSON.parse(a.body) as unknown])).toMatchObject(
      ready.map(() => [200, { data: { database: 'down' }, message: 'Degraded: database.' }]),
    );

    const migrated = gateway.logLine((l) => l.msg === 'database: answering; schema current');
    await database.restore();
    await migrated;
    await expect
      .poll(async () => JSON.parse((await gateway!.send('/readyz')).body) as unknown, EVENTUALLY)
      .toMatchObject({ message: 'SUCCESS', data: { database: 'up' } });
  });
});

/**
 * With workers, the supervising process migrates: a worker holds its queries back until that
 * migration ran, as a lone replica does its own (503 `503-00003`, readiness `down`), and its
 * readiness check that sees PostgreSQL answer has the supervising process migrate at once. An
 * empty PostgreSQL of this suite's own (port 19757) behind a relay (19756); the gateway on
 * 19750-19751, Keycloak's relay 19755.
 */
describe('a gateway of two workers whose PostgreSQL answers again before the migration', () => {
  let postgres: PostgresProcess;
  let database: TcpFront;
  let keycloak: KeycloakRelay | undefined;
  let gateway: ClusteredGateway | undefined;

  beforeAll(async () => {
    postgres = await startPostgresProcess(19757);
    database = await startTcpFront(19756, { host: '127.0.0.1', port: 19757 });
    await database.cut();
  });

  afterAll(async () => {
    await gateway?.stop();
    await keycloak?.cut();
    await database?.cut();
    await postgres?.destroy();
  });

  it('answers 503 from every worker until the schema is current', async () => {
    ({ gateway, keycloak } = await startTwoWorkers(19750, {
      DATABASE_URL: `postgres://postgres@127.0.0.1:${database.port}/postgres`,
    }));
    // The attempts so far failed; the next one waits 8 s (0.5 s doubling).
    await gateway.logLine((l) => l.msg === 'database: still unreachable' && l.attempts === 5);
    await database.restore();

    const bearer = `Bearer ${await grantAtKeycloak(await createUser('master'))}`;
    const listed = await fromEveryWorker(() =>
      gateway!.send('/api/platform/organizations', { authorization: bearer }),
    );
    expect(listed.map((a) => [a.status, JSON.parse(a.body) as unknown])).toMatchObject(
      listed.map(() => [503, { data: null, result: '503-00003' }]),
    );
    const ready = await fromEveryWorker(() => gateway!.send('/readyz'));
    expect(ready.map((a) => JSON.parse(a.body) as unknown)).toMatchObject(
      ready.map(() => ({ data: { database: 'down' } })),
    );

    // A worker's readiness check saw the database answer: the migration ran then.
    await expect(
      gateway.logLine((l) => l.msg === 'database: answering; schema current'),
    ).resolves.toMatchObject({ trigger: 'the database answered' });
    await expect
      .poll(async () => {
        const answers = await fromEveryWorker(() =>
          gateway!.send('/api/platform/organizations', { authorization: bearer }),
        );
        return answers.map((a) => a.status);
      }, EVENTUALLY)
      .toEqual([200, 200]);
  });
});
