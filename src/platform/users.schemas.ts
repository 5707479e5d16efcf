import { z } from 'zod';
import { timestampOrNull } from '../envelope/envelope.schemas.ts';
import { realmName, workspaceId } from '../tenancy/id-schemas.ts';
import { DEFAULT_PAGE, MAX_FIRST, MAX_PAGE } from './page-bounds.ts';
import { oneLine, queryCount } from './user-input.ts';

/**
 * The user-lifecycle API's inputs (see users.router.ts). Like provisioning.schemas.ts, every
 * rule is one JSON Schema can carry, so the API description is generated from these.
 */

export const userListQuery = z.strictObject({
  first: queryCount(MAX_FIRST).default(0),
  max: queryCount(MAX_PAGE).pipe(z.number().min(1)).default(DEFAULT_PAGE),
  search: oneLine(255).optional(),
});

export type UserListQuery = z.output<typeof userListQuery>;

export const passwordBody = z
  .strictObject({
    password: oneLine(1024).meta({ format: 'password', writeOnly: true }),
  })
  .meta({ id: 'PasswordReset' });

/**
 * A user as the lifecycle API answers it: the service's record type and the API description's
 * `UserRecord` both come from here.
 */
export const userRecord = z
  .strictObject({
    id: z.string(),
    username: z.string(),
    enabled: z.boolean(),
    realm: realmName,
    workspaces: z.array(workspaceId).optional().meta({
      description: 'Organization users only: the workspaces whose role `<ws>` the user holds.',
    }),
    created_timestamp: timestampOrNull,
  })
  .meta({ id: 'UserRecord' });

export type UserRecord = z.output<typeof userRecord>;
