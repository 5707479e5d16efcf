import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { toIsoTimestamp, toIsoTimestampOrNull } from '../db/column-values.ts';
import type { Operation } from './operations.schemas.ts';

export interface NewOperation {
  organizationId: string;
  workspaceId: string;
  /** Generated (random UUID) when omitted. */
  operationId?: string;
  operationName: string;
  scheduledDateForExecution?: Date | string | null;
  environment?: string | null;
  remarks?: string | null;
  user?: string;
}

export interface OperationsRepo {
  listByWorkspace(organizationId: string, workspaceId: string): Promise<Operation[]>;
  insert(operation: NewOperation): Promise<Operation>;
  /** Deletes the operations of one workspace, or of every workspace of the organization. */
  deleteAll(organizationId: string, workspaceId?: string): Promise<number>;
}

interface OperationRow {
  operation_id: string;
  organization_id: string;
  workspace_id: string;
  operation_name: string;
  scheduled_date_for_execution: unknown;
  last_run_date: unknown;
  environment: string | null;
  remarks: string | null;
  discard: boolean;
  last_update_date_time: unknown;
  last_updated_user: string;
}

const TABLE = 'operations';

function toOperation(row: OperationRow): Operation {
  return {
    parameter: {
      operation_id: row.operation_id,
      operation_name: row.operation_name,
      scheduled_date_for_execution: toIsoTimestampOrNull(row.scheduled_date_for_execution),
      last_run_date: toIsoTimestampOrNull(row.last_run_date),
      environment: row.environment,
      remarks: row.remarks,
      discard: row.discard,
      last_update_date_time: toIsoTimestamp(row.last_update_date_time),
      last_updated_user: row.last_updated_user,
    },
    file: {},
  };
}

/** Creates the operations repository over the given database. */
export function createOperationsRepo(db: Knex): OperationsRepo {
  return {
    async listByWorkspace(organizationId, workspaceId) {
      const rows = await db<OperationRow>(TABLE)
        .where({ organization_id: organizationId, workspace_id: workspaceId })
        .orderByRaw('operation_name collate "C", operation_id collate "C"');
      return rows.map(toOperation);
    },
    async insert(op) {
      const [row] = await db<OperationRow>(TABLE)
        .insert({
          operation_id: op.operationId ?? randomUUID(),
          organization_id: op.organizationId,
          workspace_id: op.workspaceId,
          operation_name: op.operationName,
          scheduled_date_for_execution: op.scheduledDateForExecution ?? null,
          environment: op.environment ?? null,
          remarks: op.remarks ?? null,
          last_updated_user: op.user ?? '',
        })
        .returning('*');
      if (!row) throw new Error('insert returned no row');
      return toOperation(row);
    },
    async deleteAll(organizationId, workspaceId) {
      const where = workspaceId === undefined ? {} : { workspace_id: workspaceId };
      return db(TABLE)
        .where({ organization_id: organizationId, ...where })
        .del();
    },
  };
}
