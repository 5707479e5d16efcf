import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOperationsRepo } from '../../src/automation/operations.repo.ts';
import { checkDatabase, openDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { createOrganizationsRepo } from '../../src/platform/organizations.repo.ts';
import { createWorkspacesRepo } from '../../src/platform/workspaces.repo.ts';

const ISO_UTC_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Typed wrapper: vitest's asymmetric matchers are typed `any`. */
function matching(pattern: RegExp): string {
  return expect.stringMatching(pattern) as string;
}

interface OpenedDatabase {
  db: Knex;
  close(): Promise<void>;
}

/** Ids unique to this run, so the shared `test` database never sees collisions. */
function uniqueId(label: string): string {
  return `t-${randomUUID().slice(0, 8)}-${label}`;
}

function describeStorageContract(backend: string, open: () => Promise<OpenedDatabase>): void {
  describe(`storage contract (${backend})`, () => {
    let opened: OpenedDatabase;
    let db: Knex;
    const createdOrganizations: string[] = [];

    beforeAll(async () => {
      opened = await open();
      db = opened.db;
      await migrateToLatest(db);
    }, 60_000);

    afterAll(async () => {
      if (!opened) return;
      if (createdOrganizations.length > 0) {
        await db('organizations').whereIn('id', createdOrganizations).delete();
      }
      await opened.close();
    }, 60_000);

    async function createOrganization(label: string, name = `Org ${label}`) {
      const id = uniqueId(label);
      createdOrganizations.push(id);
      return createOrganizationsRepo(db).insertIfAbsent({ id, name });
    }

    it('answers readiness checks', async () => {
      await expect(checkDatabase(db)).resolves.toBeUndefined();
    });

    it('treats a second migration run as a no-op', async () => {
      await migrateToLatest(db);
      const applied = await db('knex_migrations')
        .where({ name: '20261122-001-initial' })
        .count<{ count: string | number }[]>({ count: '*' });
      expect(Number(applied[0]?.count)).toBe(1);
    });

    it('inserts an organization with its defaults and ISO timestamps', async () => {
      const before = Date.now();
      const org = await createOrganization('defaults', 'Acme');
      expect(org).toEqual({
        id: matching(/^t-[0-9a-f]{8}-defaults$/),
        name: 'Acme',
        enabled: true,
        status: 'Organization Create Complete',
        create_timestamp: matching(ISO_UTC_MS),
        last_update_timestamp: matching(ISO_UTC_MS),
      });
      // Database and test clocks are the same machine; allow a little skew either way.
      expect(Date.parse(org.create_timestamp)).toBeGreaterThan(before - 5_000);
      expect(Date.parse(org.create_timestamp)).toBeLessThan(Date.now() + 5_000);
      expect(await createOrganizationsRepo(db).find(org.id)).toEqual(org);
    });

    it('keeps the first organization record when inserted twice', async () => {
      const repo = createOrganizationsRepo(db);
      const first = await createOrganization('twice', 'Original');
      const second = await repo.insertIfAbsent({ id: first.id, name: 'Renamed' });
      expect(second).toEqual(first);
      const rows = await db('organizations').where({ id: first.id }).count({ n: '*' });
      expect(Number(rows[0]?.n)).toBe(1);
      expect(await repo.find(first.id)).toEqual(first);
    });

    it('returns undefined for unknown organizations and workspaces', async () => {
      const org = await createOrganization('unknown');
      expect(await createOrganizationsRepo(db).find(uniqueId('missing'))).toBeUndefined();
      expect(await createWorkspacesRepo(db).find(org.id, 'missing')).toBeUndefined();
      expect(await createWorkspacesRepo(db).listByOrganization(uniqueId('none'))).toEqual([]);
    });

    it('lists organizations ordered by id in byte order', async () => {
      const prefix = uniqueId('order');
      const ids = [`${prefix}-b`, `${prefix}-B`, `${prefix}-a`, `${prefix}-A`];
      createdOrganizations.push(...ids);
      const repo = createOrganizationsRepo(db);
      for (const id of ids) await repo.insertIfAbsent({ id, name: id });
      const listed = (await repo.list()).map((o) => o.id).filter((id) => id.startsWith(prefix));
      expect(listed).toEqual([`${prefix}-A`, `${prefix}-B`, `${prefix}-a`, `${prefix}-b`]);
    });

    it('inserts workspaces in the API shape, idempotently, ordered by id', async () => {
      const org = await createOrganization('ws');
      const repo = createWorkspacesRepo(db);
      const full = await repo.insertIfAbsent({
        organizationId: org.id,
        id: 'ws-2',
        name: 'Second',
        description: 'Déploiement ✓',
        environments: ['dev', 'prod'],
        user: 'alice',
      });
      expect(full).toEqual({
        id: 'ws-2',
        name: 'Second',
        informations: {
          environments: [{ name: 'dev' }, { name: 'prod' }],
          description: 'Déploiement ✓',
        },
        create_timestamp: matching(ISO_UTC_MS),
        create_user: 'alice',
        last_update_timestamp: matching(ISO_UTC_MS),
        last_update_user: 'alice',
      });
      const minimal = await repo.insertIfAbsent({
        organizationId: org.id,
        id: 'ws-1',
        name: 'First',
      });
      expect(minimal).toMatchObject({
        informations: { environments: [], description: '' },
        create_user: '',
        last_update_user: '',
      });
      const again = await repo.insertIfAbsent({
        organizationId: org.id,
        id: 'ws-2',
        name: 'Other',
        environments: ['x'],
      });
      expect(again).toEqual(full);
      expect(await repo.find(org.id, 'ws-2')).toEqual(full);
      expect((await repo.listByOrganization(org.id)).map((w) => w.id)).toEqual(['ws-1', 'ws-2']);
    });

    it('rejects a workspace of an unknown organization', async () => {
      await expect(
        createWorkspacesRepo(db).insertIfAbsent({
          organizationId: uniqueId('ghost'),
          id: 'ws',
          name: 'Orphan',
        }),
      ).rejects.toThrow(/foreign key/);
    });

    it('inserts operations and lists them by name then id', async () => {
      const org = await createOrganization('ops');
      await createWorkspacesRepo(db).insertIfAbsent({ organizationId: org.id, id: 'w', name: 'W' });
      const repo = createOperationsRepo(db);
      const where = { organizationId: org.id, workspaceId: 'w' };
      const generated = await repo.insert({ ...where, operationName: 'deploy' });
      expect(generated).toEqual({
        parameter: {
          operation_id: matching(
            /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
          ),
          operation_name: 'deploy',
          scheduled_date_for_execution: null,
          last_run_date: null,
          environment: null,
          remarks: null,
          discard: false,
          last_update_date_time: matching(ISO_UTC_MS),
          last_updated_user: '',
        },
        file: {},
      });
      const scheduled = await repo.insert({
        ...where,
        operationId: 'op-b',
        operationName: 'backup',
        scheduledDateForExecution: '2027-03-04T05:06:07.890+02:00',
        environment: 'prod',
        remarks: 'nightly',
        user: 'bob',
      });
      expect(scheduled.parameter).toMatchObject({
        operation_id: 'op-b',
        scheduled_date_for_execution: '2027-03-04T03:06:07.890Z',
        environment: 'prod',
        remarks: 'nightly',
        last_updated_user: 'bob',
      });
      await repo.insert({
        ...where,
        operationId: 'op-a',
        operationName: 'backup',
        scheduledDateForExecution: new Date(Date.UTC(2027, 0, 1)),
      });
      const listed = await repo.listByWorkspace(org.id, 'w');
      expect(listed.map((o) => o.parameter.operation_id)).toEqual([
        'op-a',
        'op-b',
        generated.parameter.operation_id,
      ]);
      expect(listed[0]?.parameter.scheduled_date_for_execution).toBe('2027-01-01T00:00:00.000Z');
      expect(listed[1]).toEqual(scheduled);
      expect(await repo.listByWorkspace(org.id, 'other')).toEqual([]);
    });

    it('cascades organization deletes to workspaces and operations', async () => {
      const org = await createOrganization('cascade');
      await createWorkspacesRepo(db).insertIfAbsent({ organizationId: org.id, id: 'w', name: 'W' });
      await createOperationsRepo(db).insert({
        organizationId: org.id,
        workspaceId: 'w',
        operationName: 'doomed',
      });
      await db('organizations').where({ id: org.id }).delete();
      expect(await createWorkspacesRepo(db).listByOrganization(org.id)).toEqual([]);
      expect(await createOperationsRepo(db).listByWorkspace(org.id, 'w')).toEqual([]);
      expect(await db('operations').where({ organization_id: org.id })).toEqual([]);
    });
  });
}

describeStorageContract('postgresql', async () => {
  const db = await openDatabase({ databaseUrl: DATABASE_URL, dataDir: os.tmpdir() });
  return { db, close: () => db.destroy() };
});

describeStorageContract('pglite', async () => {
  const tempDir = await mkdtemp(path.join(os.tmpdir(), 'realmgate-storage-'));
  // A nested path proves openDatabase creates missing folders.
  const db = await openDatabase({ dataDir: path.join(tempDir, 'nested', 'data') });
  return {
    db,
    close: async () => {
      await db.destroy();
      await rm(tempDir, { recursive: true, force: true });
    },
  };
});

describe('embedded database', () => {
  it('persists data across reopen of the same data directory, a migration lock left set freed', async () => {
    const tempDir = await mkdtemp(path.join(os.tmpdir(), 'realmgate-reopen-'));
    try {
      const first = await openDatabase({ dataDir: tempDir });
      await migrateToLatest(first);
      await createOrganizationsRepo(first).insertIfAbsent({ id: 'kept', name: 'Kept' });
      // As a process killed in the middle of a migration leaves it: the next start frees it.
      await first('knex_migrations_lock').update({ is_locked: 1 });
      await first.destroy();

      const second = await openDatabase({ dataDir: tempDir });
      try {
        await migrateToLatest(second);
        expect(await createOrganizationsRepo(second).find('kept')).toMatchObject({ name: 'Kept' });
        expect(await second('knex_migrations_lock').select('is_locked')).toEqual([
          { is_locked: 0 },
        ]);
      } finally {
        await second.destroy();
      }
    } finally {
      await rm(tempDir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe('checkDatabase', () => {
  it('rejects when the server is unreachable', async () => {
    const db = await openDatabase({
      databaseUrl: 'postgres://postgres@127.0.0.1:1/test',
      dataDir: os.tmpdir(),
    });
    try {
      await expect(checkDatabase(db)).rejects.toThrow();
    } finally {
      await db.destroy();
    }
  });
});
