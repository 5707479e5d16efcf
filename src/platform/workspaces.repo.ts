import type { Knex } from 'knex';
import { toIsoTimestamp, toJsonb, toStringArray } from '../db/column-values.ts';
import type { Workspace } from './organizations.schemas.ts';

export interface NewWorkspace {
  organizationId: string;
  id: string;
  name: string;
  description?: string;
  /** Environment names. */
  environments?: string[];
  /** Recorded as both creator and last updater. */
  user?: string;
}

export interface WorkspacesRepo {
  listByOrganization(organizationId: string): Promise<Workspace[]>;
  find(organizationId: string, workspaceId: string): Promise<Workspace | undefined>;
  /** Inserts unless the id exists in the organization; returns the stored record either way. */
  insertIfAbsent(workspace: NewWorkspace): Promise<Workspace>;
  /** Deletes one workspace row, or every one of the organization; returns how many. */
  deleteAll(organizationId: string, workspaceId?: string): Promise<number>;
}

interface WorkspaceRow {
  organization_id: string;
  id: string;
  name: string;
  description: string;
  environments: unknown;
  create_timestamp: unknown;
  create_user: string;
  last_update_timestamp: unknown;
  last_update_user: string;
}

const TABLE = 'workspaces';

function toWorkspace(row: WorkspaceRow): Workspace {
  return {
    id: row.id,
    name: row.name,
    informations: {
      environments: toStringArray(row.environments).map((name) => ({ name })),
      description: row.description,
    },
    create_timestamp: toIsoTimestamp(row.create_timestamp),
    create_user: row.create_user,
    last_update_timestamp: toIsoTimestamp(row.last_update_timestamp),
    last_update_user: row.last_update_user,
  };
}

/** Creates the workspaces repository over the given database. */
export function createWorkspacesRepo(db: Knex): WorkspacesRepo {
  async function find(organizationId: string, workspaceId: string) {
    const row = await db<WorkspaceRow>(TABLE)
      .where({ organization_id: organizationId, id: workspaceId })
      .first();
    return row ? toWorkspace(row) : undefined;
  }

  return {
    async listByOrganization(organizationId) {
      const rows = await db<WorkspaceRow>(TABLE)
        .where({ organization_id: organizationId })
        .orderByRaw('id collate "C"');
      return rows.map(toWorkspace);
    },
    find,
    async insertIfAbsent(ws) {
      const user = ws.user ?? '';
      await db(TABLE)
        .insert({
          organization_id: ws.organizationId,
          id: ws.id,
          name: ws.name,
          description: ws.description ?? '',
          environments: toJsonb(ws.environments ?? []),
          create_user: user,
          last_update_user: user,
        })
        .onConflict(['organization_id', 'id'])
        .ignore();
      const stored = await find(ws.organizationId, ws.id);
      if (!stored) throw new Error(`workspace ${ws.organizationId}/${ws.id} vanished after insert`);
      return stored;
    },
    async deleteAll(organizationId, workspaceId) {
      const where = workspaceId === undefined ? {} : { id: workspaceId };
      return db(TABLE)
        .where({ organization_id: organizationId, ...where })
        .del();
    },
  };
}
