import { z } from 'zod';
import { MASTER_REALM, ORGANIZATION_ID, WORKSPACE_ID } from './identifiers.ts';

/**
 * The ids as zod schemas, for bodies and path parameters alike; the API description shows them
 * as the components `OrganizationId` and `WorkspaceId`. (Apart from identifiers.ts, which the
 * CLI bundle shares and which stays free of zod.)
 */
export const organizationId = z
  .string()
  .regex(ORGANIZATION_ID, 'must be a-z, 0-9, - or _, start with a letter, at most 36 long')
  .meta({
    id: 'OrganizationId',
    description:
      'Organization id, also the name of its Keycloak realm. Not `master` (the ' +
      "administrators' realm), nor `platform`, `admin`, `auth` or `api` (path segments of " +
      'their own).',
    examples: ['demo-org'],
  });

export const workspaceId = z
  .string()
  .regex(WORKSPACE_ID, 'must be A-Z, a-z, 0-9, - or _, start with a letter or digit, at most 36')
  .meta({ id: 'WorkspaceId', examples: ['demo-ws'] });

/** A realm a caller signs in to: `master`, or an organization's. */
export const realmName = z.union([z.literal(MASTER_REALM), organizationId]).meta({
  id: 'Realm',
  description: '`master` for system administrators, else an organization id.',
});
