import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/database.ts';
import {
  MIGRATION_RETRY_FIRST_MS,
  MIGRATION_RETRY_MAX_MS,
  migrateAtStart,
  type RetryWait,
} from '../../src/db/migrate-at-start.ts';
import { MIGRATION_LOCK_KEY } from '../../src/db/migrate.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { loggerToRecords } from '../helpers/log-lines.ts';
import { onPostgresServer } from '../helpers/postgres-server.ts';
import { startDatabaseRelay, type DatabaseRelay } from '../helpers/tcp-front.ts';
import { testBackchannelUrl } from '../helpers/keycloak.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * The migration in the background of a process started while PostgreSQL was unreachable, as the
 * process stops: an attempt under way when the stop comes may still succeed, and then nothing
 * that waits for the schema (the demo's data, the workers' queries) starts. A database of the
 * test's own on the test PostgreSQL, behind a relay on port 19774.
 */
describe('the migration in the background of a process that stops', () => {
  const server = new URL(testEnv().databaseUrl);
  server.pathname = '';
  const serverUrl = server.href.replace(/\/$/, '');
  const database = `realmgate_migrate_stop_${randomBytes(4).toString('hex')}`;
  let relay: DatabaseRelay;
  let db: Knex | undefined;
  let other: pg.Client | undefined;

  beforeAll(async () => {
    await onPostgresServer(serverUrl, `create database ${database}`);
    relay = await startDatabaseRelay(19774);
  });

  afterAll(async () => {
    await other?.end();
    await db?.destroy();
    await relay?.cut();
    await onPostgresServer(serverUrl, `drop database if exists ${database} with (force)`);
  });

  it('succeeds after stop() and resolves nothing: nothing starts once the process stops', async () => {
    const { logger, records: lines } = loggerToRecords();
    await relay.cut();
    const relayed = new URL(relay.databaseUrl);
    relayed.pathname = `/${database}`;
    db = await openDatabase({ databaseUrl: relayed.href, dataDir: os.tmpdir() });
    const schema = await migrateAtStart(db, logger);
    expect(schema.current()).toBe(false);

    // Another process in the middle of its migration holds the lock: the next attempt waits.
    other = new pg.Client({ connectionString: `${serverUrl}/${database}` });
    await other.connect();
    await other.query('select pg_advisory_lock($1::bigint)', [MIGRATION_LOCK_KEY]);
    await relay.restore();
    await expect.poll(() => lockWaiters(other!), EVENTUALLY).toBe(1);

    schema.stop();
    const outcome = Promise.race([
      schema.ready.then(() => 'ready'),
      expect
        .poll(
          () => lines.some((l) => l.msg === 'database: migrated as the process stopped'),
          EVENTUALLY,
        )
        .toBe(true)
        .then(() => 'stopped'),
    ]);
    await other.query('select pg_advisory_unlock($1::bigint)', [MIGRATION_LOCK_KEY]);
    expect(await outcome).toBe('stopped');
  });
});

/**
 * The migration in the background while PostgreSQL stays unreachable to it, woken by every
 * readiness check (as the public /readyz would, answered on a pooled connection while the
 * migration's new ones are refused): the wakes may add an attempt per backoff period, no more,
 * not one per check. The waits on the test's own time; the attempts against a relay on port
 * 19798 the test keeps cut.
 */
describe('the migration in the background woken by readiness checks', () => {
  let relay: DatabaseRelay;
  let db: Knex | undefined;

  beforeAll(async () => {
    relay = await startDatabaseRelay(19798);
    await relay.cut();
  });

  afterAll(async () => {
    await db?.destroy();
    await relay?.cut();
  });

  it('tries at most once more per backoff period, however often it is woken', async () => {
    const { logger, records: lines } = loggerToRecords();
    db = await openDatabase({ databaseUrl: relay.databaseUrl, dataDir: os.tmpdir() });
    const waits = testWaits();
    const schema = await migrateAtStart(db, logger, waits.wait);
    const between = { ...EVENTUALLY, interval: 5 };
    const spanMs = 20_000;
    try {
      // A readiness check every 100 ms of the test's time, each waking the migration.
      for (let elapsed = 0; elapsed < spanMs; elapsed += 100) {
        await expect.poll(waits.waiting, between).toBe(true);
        schema.databaseAnswered();
        await expect.poll(waits.waiting, between).toBe(true);
        waits.advance(100);
      }
    } finally {
      schema.stop();
    }
    const attempts = lines.filter((l) => l.msg === 'database: still unreachable').length;
    let scheduled = 0;
    for (let at = 0, waitMs = MIGRATION_RETRY_FIRST_MS; at + waitMs <= spanMs; scheduled++) {
      at += waitMs;
      waitMs = Math.min(waitMs * 2, MIGRATION_RETRY_MAX_MS);
    }
    // Woken, it tried sooner than its schedule; never more than once more per period.
    expect(attempts).toBeGreaterThan(scheduled);
    expect(attempts).toBeLessThanOrEqual(2 * scheduled);
  });
});

/**
 * `node src/main.ts --demo` started while PostgreSQL is unreachable waits for its migration in the
 * background before it makes the demo's data; once the database answers with a schema this
 * release refuses (another history of migrations), the start fails: one `start failed`, exit 1.
 * A database of the test's own behind a relay on port 19778; the gateway on 19776/19777.
 */
describe('a demo whose migration in the background is refused', () => {
  const server = new URL(testEnv().databaseUrl);
  server.pathname = '';
  const serverUrl = server.href.replace(/\/$/, '');
  const database = `realmgate_demo_refused_${randomBytes(4).toString('hex')}`;
  let relay: DatabaseRelay;
  let dataDir: string;

  beforeAll(async () => {
    await onPostgresServer(serverUrl, `create database ${database}`);
    const client = new pg.Client({ connectionString: `${serverUrl}/${database}` });
    await client.connect();
    try {
      // Another history than this release's: the migration refuses to run on it.
      await client.query(
        'create table knex_migrations (id serial primary key, name varchar(255), batch integer, migration_time timestamptz)',
      );
      await client.query(
        `insert into knex_migrations (name, batch, migration_time) values ('not-ours', 1, now())`,
      );
    } finally {
      await client.end();
    }
    relay = await startDatabaseRelay(19778);
    await relay.cut();
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'realmgate-demo-'));
  });

  afterAll(async () => {
    await relay?.cut();
    await onPostgresServer(serverUrl, `drop database if exists ${database} with (force)`);
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('fails its start once, and exits 1', async () => {
    const relayed = new URL(relay.databaseUrl);
    relayed.pathname = `/${database}`;
    const env = testEnv();
    const child = spawn(process.execPath, ['src/main.ts', '--demo'], {
      env: {
        PATH: process.env.PATH,
        HOST: '127.0.0.1',
        PORT: '19776',
        ADMIN_PORT: '19777',
        PUBLIC_URL: env.publicUrl,
        KEYCLOAK_URL: env.keycloakUrl,
        KEYCLOAK_ADMIN_PASSWORD: env.keycloakAdminPassword,
        KEYCLOAK_CLIENT_SECRET: env.gatewayClientSecret,
        BACKCHANNEL_LOGOUT_URL: testBackchannelUrl(),
        DATABASE_URL: relayed.href,
        DATA_DIR: dataDir,
        // One process: the gateway, and its migration, in this one.
        WORKERS: '1',
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exited = once(child, 'exit');
    const lines: Record<string, unknown>[] = [];
    let pending = '';
    const read = (chunk: Buffer) => {
      pending += chunk.toString();
      const complete = pending.split('\n');
      pending = complete.pop()!;
      for (const text of complete) {
        try {
          lines.push(JSON.parse(text) as Record<string, unknown>);
        } catch {
          lines.push({ msg: text });
        }
      }
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    try {
      await expect
        .poll(() => lines.some((l) => l.msg === 'database: still unreachable'), EVENTUALLY)
        .toBe(true);
      await relay.restore();
      const [code] = (await exited) as [number | null];
      expect(code).toBe(1);
      expect(lines.filter((l) => l.msg === 'start failed')).toHaveLength(1);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

/** Sessions of this database waiting for the migration's advisory lock (a bigint key). */
async function lockWaiters(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ waiting: number }>(
    `select count(*)::int as waiting from pg_locks
      where locktype = 'advisory' and not granted and objsubid = 1
        and database = (select oid from pg_database where datname = current_database())
        and ((classid::bigint << 32) | objid::bigint) = $1::bigint`,
    [MIGRATION_LOCK_KEY],
  );
  return rows[0]!.waiting;
}

/**
 * Waits on a time of the test's own, which only `advance` moves: each ends once that time is past
 * its end, or when its signal aborts. `waiting`: one is under way (the migration between attempts).
 */
function testWaits(): { wait: RetryWait; waiting: () => boolean; advance: (ms: number) => void } {
  let now = 0;
  let pending: { until: number; signal: AbortSignal; end: () => void }[] = [];
  return {
    wait: (ms, signal) =>
      new Promise<void>((resolve) => {
        pending.push({ until: now + ms, signal, end: resolve });
        signal.addEventListener('abort', () => resolve(), { once: true });
      }),
    waiting: () => pending.some((w) => w.until > now && !w.signal.aborted),
    advance(ms) {
      now += ms;
      for (const w of pending.filter((w) => w.until <= now)) w.end();
      pending = pending.filter((w) => w.until > now && !w.signal.aborted);
    },
  };
}
