import { z } from 'zod';
import type { ErrorCode } from '../envelope/errors.ts';
import { routeFor, type RouteInput } from '../http/route-table.ts';
import type { OrganizationLifecycle } from './organization-lifecycle.service.ts';
import { organizationRecord, workspaceRecord } from './organizations.schemas.ts';
import { pathIds } from './path-ids.ts';
import { organizationId } from '../tenancy/id-schemas.ts';

const route = routeFor<OrganizationLifecycle>({ metricsClass: 'provisioning' });

/**
 * The administrators' read, suspend and delete calls for organizations and workspaces, under
 * `/api/platform` beside provisioning (same admission: a master-realm user).
 * `GET /organizations` (the list) is the listing's (listing.router.ts).
 */
const { organization_id, workspace_id } = pathIds;
type Path = Pick<RouteInput, 'params'>;
const org = ({ params }: Path) => String(params.organization_id);
const ws = ({ params }: Path) => String(params.workspace_id);
const ORG_ERRORS: ErrorCode[] = ['organizationNotFound'];

/** `?confirm=<organization_id>`: anything else (absent, repeated, another id) is refused. */
const confirmQuery = z.object({
  confirm: organizationId,
});

const setEnabled = (verb: 'disable' | 'enable', summary: string, description: string) =>
  route({
    method: 'post',
    path: `/api/platform/organizations/{organization_id}/${verb}`,
    operationId: `${verb}Organization`,
    summary,
    description,
    tags: ['platform'],
    params: { organization_id },
    data: organizationRecord,
    errors: ORG_ERRORS,
    audit: { action: `organization.${verb}`, target: (input) => ({ organization: org(input) }) },
    handler: (lifecycle, input) => lifecycle.setOrganizationEnabled(org(input), verb === 'enable'),
  });

export const organizationLifecycleRoutes = [
  route({
    method: 'get',
    path: '/api/platform/organizations/{organization_id}',
    operationId: 'getOrganization',
    summary: 'One organization (as the list shows it)',
    tags: ['platform'],
    params: { organization_id },
    data: organizationRecord,
    errors: ORG_ERRORS,
    handler: (lifecycle, input) => lifecycle.getOrganization(org(input)),
  }),
  route({
    method: 'delete',
    path: '/api/platform/organizations/{organization_id}',
    operationId: 'deleteOrganization',
    summary: 'Delete an organization: its realm, workspaces and operations',
    description:
      'Needs `?confirm=<organization_id>` (else 400 `400-23001`). Deletes the Keycloak realm ' +
      '(users, sessions, clients), then the records; every replica forgets the organization ' +
      'at once, and refuses every token and cached Basic login of its realm from before the ' +
      'delete, in an organization created again under the id too. Answers the deleted record. ' +
      'A call that stopped half-way can be repeated.',
    tags: ['platform'],
    params: { organization_id },
    query: confirmQuery,
    queryRefusal: 'organizationDeleteUnconfirmed',
    data: organizationRecord,
    errors: [...ORG_ERRORS, 'organizationDeleteUnconfirmed'],
    audit: { action: 'organization.delete', target: (input) => ({ organization: org(input) }) },
    handler: (lifecycle, input) => lifecycle.deleteOrganization(org(input), input.query.confirm),
  }),
  setEnabled(
    'disable',
    'Disable an organization: its calls answer 403 `403-23001`, its logins fail',
    'Disables the Keycloak realm, then the record (`enabled: false`); every call under ' +
      '`/api/<organization_id>/` is refused at once on every replica sharing Redis, tokens ' +
      'issued before included. Users, sessions and refresh tokens are kept. Idempotent.',
  ),
  setEnabled(
    'enable',
    'Enable a disabled organization again',
    'Enables the Keycloak realm, then the record. Idempotent.',
  ),
  route({
    method: 'get',
    path: '/api/platform/organizations/{organization_id}/workspaces',
    operationId: 'listOrganizationWorkspaces',
    summary: 'Every workspace of an organization',
    tags: ['platform'],
    params: { organization_id },
    data: z.array(workspaceRecord),
    errors: ORG_ERRORS,
    handler: (lifecycle, input) => lifecycle.listWorkspaces(org(input)),
  }),
  route({
    method: 'delete',
    path: '/api/platform/organizations/{organization_id}/workspaces/{workspace_id}',
    operationId: 'deleteWorkspace',
    summary: 'Delete a workspace: roles `<ws>`, `_<ws>-admin`, its operations and record',
    tags: ['platform'],
    params: { organization_id, workspace_id },
    data: workspaceRecord,
    errors: [...ORG_ERRORS, 'workspaceNotFound'],
    audit: {
      action: 'workspace.delete',
      target: (input) => ({ organization: org(input), workspace: ws(input) }),
    },
    handler: (lifecycle, input) => lifecycle.deleteWorkspace(org(input), ws(input)),
  }),
];
