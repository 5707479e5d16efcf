import { z } from 'zod';
import type { PathParam } from '../http/route-table.ts';
import { organizationId, workspaceId } from '../tenancy/id-schemas.ts';

/**
 * The path ids of the platform API. An `:org` or `:ws` outside its alphabet names nothing, so it
 * is 404 before any database or Keycloak call (the check is the schema's; see mountRoutes).
 */
export const pathIds = {
  organization_id: { schema: organizationId, invalid: 'organizationNotFound' },
  workspace_id: { schema: workspaceId, invalid: 'workspaceNotFound' },
  /** In `/api/<org>/...` the admission has checked the organization already. */
  callerOrganization: { schema: organizationId },
  username: { schema: z.string().min(1).max(255) },
  refreshTokenId: { schema: z.string().meta({ description: 'Keycloak offline session id.' }) },
} satisfies Record<string, PathParam>;
