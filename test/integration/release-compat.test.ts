import { execFileSync, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as todayOperations from '../../src/automation/operations.repo.ts';
import * as todayTokens from '../../src/auth/token-details.ts';
import * as todayConfig from '../../src/config/config.ts';
import * as todayDatabase from '../../src/db/database.ts';
import * as todayMigrate from '../../src/db/migrate.ts';
import {
  compareVersions,
  readableFrom,
  RELEASES,
  type Release,
} from '../../src/db/schema-history.ts';
import { appliedMigrations, readSchemaRecord } from '../../src/db/schema-record.ts';
import * as todayGateway from '../../src/gateway.ts';
import { createLogger } from '../../src/http/logger.ts';
import * as todayOrganizations from '../../src/platform/organizations.repo.ts';
import * as todayWorkspaces from '../../src/platform/workspaces.repo.ts';
import { VERSION } from '../../src/release/version.ts';
import { basicAuth } from '../helpers/api.ts';
import { createUser } from '../helpers/keycloak.ts';
import { onPostgresServer } from '../helpers/postgres-server.ts';
import { previousRelease } from '../helpers/release-commit.ts';
import { testEnv } from '../helpers/test-env.ts';

/*
 * The migration rule (docs/operations.md, "Upgrades and migrations") where a rolling upgrade
 * meets it: the previous release's code, taken out of git at its commit (released-migrations.json
 * names it; test/helpers/release-commit.ts finds it without tags) into a folder of its own, runs on the schema today's code makes; today's code, given
 * the previous release's schema, migrates it before it serves. Each on a database of its own, on
 * the real PostgreSQL server of the integration stack.
 */

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const git = (...args: string[]) =>
  execFileSync('git', args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const head = git('rev-parse', 'HEAD').trim();

/** The modules of one release's code that touch the database, and its gateway. */
interface Code {
  migrate: typeof todayMigrate;
  database: typeof todayDatabase;
  organizations: typeof todayOrganizations;
  workspaces: typeof todayWorkspaces;
  operations: typeof todayOperations;
  tokens: typeof todayTokens;
  config: typeof todayConfig;
  gateway: typeof todayGateway;
}

/** The previous release's modules: written for its own interface, which these calls use. */
async function codeAt(dir: string): Promise<Code> {
  const load = async <T>(file: string): Promise<T> =>
    (await import(path.join(dir, 'src', file))) as T;
  return {
    migrate: await load<Code['migrate']>('db/migrate.ts'),
    database: await load<Code['database']>('db/database.ts'),
    organizations: await load<Code['organizations']>('platform/organizations.repo.ts'),
    workspaces: await load<Code['workspaces']>('platform/workspaces.repo.ts'),
    operations: await load<Code['operations']>('automation/operations.repo.ts'),
    tokens: await load<Code['tokens']>('auth/token-details.ts'),
    config: await load<Code['config']>('config/config.ts'),
    gateway: await load<Code['gateway']>('gateway.ts'),
  };
}

const today: Code = {
  migrate: todayMigrate,
  database: todayDatabase,
  organizations: todayOrganizations,
  workspaces: todayWorkspaces,
  operations: todayOperations,
  tokens: todayTokens,
  config: todayConfig,
  gateway: todayGateway,
};

const SERVER = testEnv().databaseUrl.replace(/\/[^/]*$/, '');
const suffix = randomBytes(4).toString('hex');
const databases = {
  today: `realmgate_compat_today_${suffix}`,
  old: `realmgate_compat_old_${suffix}`,
  ahead: `realmgate_compat_ahead_${suffix}`,
};
const handles: Knex[] = [];

async function open(code: Code, database: string): Promise<Knex> {
  const db = await code.database.openDatabase({
    databaseUrl: `${SERVER}/${database}`,
    dataDir: os.tmpdir(),
  });
  handles.push(db);
  return db;
}

/** What one release's code writes: an organization, a workspace, an operation, token details. */
async function writeWith(code: Code, db: Knex) {
  const organizationId = `compat-${randomUUID().slice(0, 8)}`;
  const sessionId = randomUUID();
  await code.organizations.createOrganizationsRepo(db).insertIfAbsent({
    id: organizationId,
    name: `Compat ${organizationId}`,
  });
  await code.workspaces.createWorkspacesRepo(db).insertIfAbsent({
    organizationId,
    id: 'ws1',
    name: 'Workspace 1',
    environments: ['prod'],
  });
  await code.operations
    .createOperationsRepo(db)
    .insert({ organizationId, workspaceId: 'ws1', operationName: 'backup' });
  const tokens = code.tokens.createTokenDetailsStore(db);
  expect(
    await tokens.record({
      sessionId,
      realm: organizationId,
      userId: 'user-1',
      name: 'nightly job',
      workspaces: ['ws1'],
      readOnly: true,
      expiresAt: Date.parse('2030-01-01T00:00:00Z'),
    }),
  ).toBe('recorded');
  await tokens.noteUse(
    { sessionId, realm: organizationId, userId: 'user-1' },
    { at: Date.parse('2026-11-27T10:00:00Z'), address: '192.0.2.7', userAgent: 'job/1' },
    0,
  );
  return { organizationId, sessionId };
}

/** The same records as one release's code reads them. */
async function readWith(code: Code, db: Knex, { organizationId, sessionId }: Written) {
  const tokens = code.tokens.createTokenDetailsStore(db);
  return {
    organization: await code.organizations.createOrganizationsRepo(db).find(organizationId),
    workspaces: await code.workspaces.createWorkspacesRepo(db).listByOrganization(organizationId),
    operations: await code.operations
      .createOperationsRepo(db)
      .listByWorkspace(organizationId, 'ws1'),
    reach: reachBothRead(await tokens.reachOf(sessionId)),
    tokens: await tokens.ofUser(organizationId, 'user-1'),
  };
}
type Written = Awaited<ReturnType<typeof writeWith>>;

/**
 * A token's reach as every release since 0.1.0 reads it. Later releases may show more of the same
 * row (the job credential's `name`, since the audit log; `tokens` above compares it), which
 * the previous release's code does not return.
 */
function reachBothRead(reach: todayTokens.TokenReach | undefined) {
  return (
    reach && { workspaces: reach.workspaces, readOnly: reach.readOnly, expiresAt: reach.expiresAt }
  );
}

let previous: { release: Release; commit: string };
let checkout: string;
let old: Code;

beforeAll(async () => {
  previous = previousRelease(root, RELEASES);
  checkout = await mkdtemp(path.join(os.tmpdir(), `realmgate-${previous.release.version}-`));
  const archive = path.join(checkout, 'code.tar');
  git('archive', '--output', archive, previous.commit, 'src', 'package.json', 'keycloak');
  execFileSync('tar', ['-xf', archive, '-C', checkout]);
  // Its dependencies: today's. A release that changed a dependency's interface its previous
  // release used would show here.
  await symlink(path.join(root, 'node_modules'), path.join(checkout, 'node_modules'), 'dir');
  old = await codeAt(checkout);
  for (const database of Object.values(databases)) {
    await onPostgresServer(SERVER, `create database ${database}`);
  }
}, 60_000);

afterAll(async () => {
  await Promise.all(handles.splice(0).map((db) => db.destroy()));
  for (const database of Object.values(databases)) {
    await onPostgresServer(SERVER, `drop database if exists ${database} with (force)`);
  }
  if (checkout) await rm(checkout, { recursive: true, force: true });
});

describe("the previous release's code on today's schema, as in a rolling upgrade", () => {
  let db: Knex;
  let oldDb: Knex;
  let oldGateway: todayGateway.Gateway;
  let admin: Awaited<ReturnType<typeof createUser>>;

  // The old replicas run; the first new one migrates; the old ones keep serving until replaced.
  beforeAll(async () => {
    oldDb = await open(old, databases.today);
    await old.migrate.migrateToLatest(oldDb);
    admin = await createUser('master');
    const config = old.config.loadConfig({
      HOST: '127.0.0.1',
      PORT: '21090',
      ADMIN_PORT: '21091',
      PUBLIC_URL: testEnv().publicUrl,
      KEYCLOAK_URL: testEnv().keycloakUrl,
      KEYCLOAK_ADMIN_PASSWORD: testEnv().keycloakAdminPassword,
      KEYCLOAK_CLIENT_SECRET: testEnv().gatewayClientSecret,
      DATABASE_URL: `${SERVER}/${databases.today}`,
    });
    oldGateway = await old.gateway.startGateway(
      config,
      testEnv().keycloakUrl,
      createLogger('silent'),
    );
    db = await open(today, databases.today);
    await today.migrate.migrateToLatest(db);
  }, 60_000);

  afterAll(async () => {
    await oldGateway?.close();
  });

  it('is the release before this one, taken out at its commit', () => {
    expect(compareVersions(previous.release.version, VERSION)).toBeLessThanOrEqual(0);
    expect(previous.commit).not.toBe(head);
    expect(git('cat-file', '-t', previous.commit).trim()).toBe('commit');
    expect(previous.release.migrations).toEqual(
      today.migrate.MIGRATION_NAMES.slice(0, previous.release.migrations.length),
    );
  });

  it('a running old replica keeps serving: it lists what today wrote after the migration', async () => {
    const written = await writeWith(today, db);
    const ready = await fetch('http://127.0.0.1:21090/readyz');
    expect(await ready.json()).toMatchObject({ data: { database: 'up' } });
    const res = await fetch('http://127.0.0.1:21090/api/platform/organizations', {
      headers: { authorization: basicAuth(admin) },
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { data: { id: string; name: string }[] };
    expect(body.data).toContainEqual(
      expect.objectContaining({
        id: written.organizationId,
        name: `Compat ${written.organizationId}`,
      }),
    );
  });

  it('its repositories read what today wrote and write what today reads, record for record', async () => {
    for (const [writer, reader] of [
      [today, old],
      [old, today],
    ] as const) {
      const written = await writeWith(writer, writer === today ? db : oldDb);
      const seenByWriter = await readWith(writer, writer === today ? db : oldDb, written);
      const seenByReader = await readWith(reader, reader === today ? db : oldDb, written);
      expect(seenByWriter.organization?.id).toBe(written.organizationId);
      expect(seenByWriter.operations).toHaveLength(1);
      expect(seenByWriter.reach).toEqual({
        workspaces: ['ws1'],
        readOnly: true,
        expiresAt: Date.parse('2030-01-01T00:00:00Z'),
      });
      expect(seenByWriter.tokens).toMatchObject([
        { sessionId: written.sessionId, name: 'nightly job', lastUse: { address: '192.0.2.7' } },
      ]);
      expect(seenByReader).toEqual(seenByWriter);
    }
  });

  it('an old replica that restarts: starts, migrating nothing (or, before 0.2.0, refused by knex)', async () => {
    const before = await appliedMigrations(db);
    expect(before).toEqual([...today.migrate.MIGRATION_NAMES]);
    const restarted = old.migrate.migrateToLatest(await open(old, databases.today));
    // Releases before the schema record (0.1.0) leave the check to knex, which refuses any
    // migration it does not know: such a replica cannot restart once a new one has migrated
    // (CHANGELOG.md, "Upgrading").
    const predatesRecord = !existsSync(path.join(checkout, 'src/db/schema-record.ts'));
    if (predatesRecord && before.length > previous.release.migrations.length) {
      await expect(restarted).rejects.toThrow(/migration directory is corrupt/);
    } else {
      await expect(restarted).resolves.toBeUndefined();
    }
    expect(await appliedMigrations(db)).toEqual(before);
  });
});

describe("today's code on the previous release's schema", () => {
  it('migrates it before serving, records who may run on it, and reads what was there', async () => {
    const oldDb = await open(old, databases.old);
    await old.migrate.migrateToLatest(oldDb);
    const written = await writeWith(old, oldDb);
    const seenByOld = await readWith(old, oldDb, written);

    const db = await open(today, databases.old);
    await today.migrate.migrateToLatest(db);
    expect(await appliedMigrations(db)).toEqual([...today.migrate.MIGRATION_NAMES]);
    expect(await readSchemaRecord(db)).toEqual({
      readableFrom: readableFrom(VERSION, today.migrate.MIGRATION_NAMES),
      migratedBy: VERSION,
    });
    expect(await readWith(today, db, written)).toEqual(seenByOld);
  });
});

describe('a database migrated by a later release', () => {
  const FUTURE = '29991231-001-from-a-later-release';
  let db: Knex;

  /** The database as release `by` leaves it: one migration more, and its record. */
  async function migratedBy(by: string, readable: string): Promise<void> {
    await db('knex_migrations').where({ name: FUTURE }).delete();
    await db('knex_migrations').insert({ name: FUTURE, batch: 99, migration_time: new Date() });
    await db('realmgate_schema').update({ readable_from: readable, migrated_by: by });
  }

  beforeAll(async () => {
    db = await open(today, databases.ahead);
    await today.migrate.migrateToLatest(db);
  });

  it('the next release, which says this one may run on it: starts, migrating nothing', async () => {
    await migratedBy('99.0.0', VERSION);
    const lines: string[] = [];
    const logger = createLogger('info', { write: (line: string) => void lines.push(line) });
    await today.migrate.migrateToLatest(db, logger);
    expect(await appliedMigrations(db)).toEqual([...today.migrate.MIGRATION_NAMES, FUTURE]);
    expect(lines.map((l) => JSON.parse(l) as Record<string, unknown>)).toContainEqual(
      expect.objectContaining({
        msg: 'database: migrated by a newer release whose schema this one runs on; nothing migrated',
        migratedBy: '99.0.0',
        unknownMigrations: [FUTURE],
      }),
    );
  });

  it('further ahead: refused, and the schema and its record stay as they were', async () => {
    await migratedBy('99.1.0', '99.0.0');
    await expect(today.migrate.migrateToLatest(db)).rejects.toThrow(
      new today.migrate.SchemaRefusedError(
        `realmgate ${VERSION} cannot run on this database: the database was migrated by ` +
          `realmgate 99.1.0 (migrations unknown here: ${FUTURE}), whose schema realmgate 99.0.0 ` +
          `and later can run on; this is realmgate ${VERSION}, more than one release back. Run a ` +
          'release that can read this database, or restore the backup taken before the upgrade ' +
          '(docs/operations.md, "Upgrades and migrations").',
      ),
    );
    expect(await appliedMigrations(db)).toEqual([...today.migrate.MIGRATION_NAMES, FUTURE]);
    expect(await readSchemaRecord(db)).toEqual({ readableFrom: '99.0.0', migratedBy: '99.1.0' });
  });

  it('further ahead: the gateway exits at start, its log saying why', async () => {
    await migratedBy('99.1.0', '99.0.0');
    const env = {
      PATH: process.env.PATH,
      HOST: '127.0.0.1',
      PORT: '21100',
      ADMIN_PORT: '21101',
      WORKERS: '2',
      PUBLIC_URL: testEnv().publicUrl,
      KEYCLOAK_URL: testEnv().keycloakUrl,
      KEYCLOAK_ADMIN_PASSWORD: testEnv().keycloakAdminPassword,
      KEYCLOAK_CLIENT_SECRET: testEnv().gatewayClientSecret,
      DATABASE_URL: `${SERVER}/${databases.ahead}`,
    };
    const { code, stdout } = await new Promise<{ code: number | null; stdout: string }>(
      (resolve, reject) => {
        const child = spawn(process.execPath, ['src/main.ts'], { cwd: root, env });
        let out = '';
        child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
        child.on('error', reject);
        child.on('exit', (exitCode) => resolve({ code: exitCode, stdout: out }));
      },
    );
    expect(code).toBe(1);
    const logged = stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg: string; version?: string; err?: { message: string } });
    expect(logged[0]).toMatchObject({ msg: `realmgate ${VERSION} starting`, version: VERSION });
    expect(logged.at(-1)).toMatchObject({
      msg: 'start failed',
      err: { message: expect.stringContaining('more than one release back') as unknown },
    });
  });
});
