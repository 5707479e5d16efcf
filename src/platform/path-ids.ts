import { z } from 'zod';
import type { ErrorCode } from '../envelope/errors.ts';
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
  /** Longer names no session: 404 before Keycloak is asked for the user's sessions. */
  refreshTokenId: {
    schema: z.string().min(1).max(255).meta({
      description: 'Keycloak offline session id, or the name given at issuance.',
    }),
    invalid: 'refreshTokenNotFound',
  },
} satisfies Record<string, PathParam>;

/**
 * Where the master and the organization variant of a route live: the path below which each is
 * declared, the operationId's suffix, how it is named in a summary, and what the organization
 * variant adds (its id, its refusals). A handler tells them apart by `RouteInput.realm`.
 */
export interface RealmVariant {
  base: string;
  suffix: 'Master' | 'Organization';
  name: string;
  params: Record<string, PathParam>;
  errors: ErrorCode[];
}

const MASTER: RealmVariant = {
  base: '/api/platform',
  suffix: 'Master',
  name: 'realm master',
  params: {},
  errors: [],
};

/** Administrators' routes on a realm: master's own, or an organization's (by its id). */
export const administeredRealms: RealmVariant[] = [
  MASTER,
  {
    base: '/api/platform/organizations/{organization_id}',
    suffix: 'Organization',
    name: "an organization's realm",
    params: { organization_id: pathIds.organization_id },
    errors: ['organizationNotFound'],
  },
];

/** The caller's own routes, in the caller's realm. */
export const callerRealms: RealmVariant[] = [
  MASTER,
  {
    base: '/api/{organization_id}/platform',
    suffix: 'Organization',
    name: "an organization's realm",
    params: { organization_id: pathIds.callerOrganization },
    // Refused unknown or disabled by the admission (auth/admission.ts), which says so itself.
    errors: [],
  },
];
