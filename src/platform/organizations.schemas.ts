import { z } from 'zod';
import { timestamp } from '../envelope/envelope.schemas.ts';
import { organizationId, workspaceId } from '../tenancy/id-schemas.ts';

/**
 * An organization and a workspace as the platform API answers them: the repositories' record
 * types and the API description's `Organization` and `Workspace` both come from here.
 */
export const organizationRecord = z
  .strictObject({
    id: organizationId,
    name: z.string(),
    enabled: z.boolean(),
    status: z.string(),
    create_timestamp: timestamp,
    last_update_timestamp: timestamp,
  })
  .meta({ id: 'Organization' });

export type Organization = z.output<typeof organizationRecord>;

export const workspaceRecord = z
  .strictObject({
    id: workspaceId,
    name: z.string(),
    informations: z.strictObject({
      environments: z.array(z.strictObject({ name: z.string() })),
      description: z.string(),
    }),
    create_timestamp: timestamp,
    create_user: z.string(),
    last_update_timestamp: timestamp,
    last_update_user: z.string(),
  })
  .meta({ id: 'Workspace' });

export type Workspace = z.output<typeof workspaceRecord>;
