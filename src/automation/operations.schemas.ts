import { z } from 'zod';
import { timestamp, timestampOrNull } from '../envelope/envelope.schemas.ts';

/**
 * An operation as the automation API answers it (the operation list, and provisioning's
 * `POST .../operations`): the repository's record type and the API description's
 * `Operation` both come from here.
 */
export const operationRecord = z
  .strictObject({
    parameter: z.strictObject({
      operation_id: z.string(),
      operation_name: z.string(),
      scheduled_date_for_execution: timestampOrNull,
      last_run_date: timestampOrNull,
      environment: z.string().nullable(),
      remarks: z.string().nullable(),
      discard: z.boolean(),
      last_update_date_time: timestamp,
      last_updated_user: z.string(),
    }),
    /** Always empty: operation files are not stored by the gateway. */
    file: z.strictObject({}).meta({ maxProperties: 0, description: 'Always empty.' }),
  })
  .meta({ id: 'Operation' });

export type Operation = z.output<typeof operationRecord>;
