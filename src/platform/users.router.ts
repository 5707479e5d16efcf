import type { Request } from 'express';
import { z } from 'zod';
import type { ErrorCode } from '../envelope/errors.ts';
import { routeFor, type AnyRoute, type PathParam } from '../http/route-table.ts';
import { principalOf } from '../edge/request-scope.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { pathIds } from './path-ids.ts';
import { passwordBody, userListQuery, userRecord } from './users.schemas.ts';
import type { UsersService } from './users.service.ts';

const route = routeFor<UsersService>();

/**
 * The user lifecycle (list, get, disable, enable, delete, password, workspace roles) under
 * `/api/platform`: master users under `/users`, an organization's under
 * `/organizations/{organization_id}/users` (master-realm callers only). Every change is
 * audited, its target naming the realm and user, never a password.
 */
const { organization_id, workspace_id, username } = pathIds;
const realmOf = (req: Request) =>
  req.params.organization_id === undefined ? MASTER_REALM : String(req.params.organization_id);
const usernameOf = (req: Request) => String(req.params.username);
const target = (req: Request) => ({ realm: realmOf(req), username: usernameOf(req) });

const PROTECTED_DESCRIPTION =
  "Refused with 403 `403-00002`, changing nothing, for Keycloak's bootstrap administrator, " +
  "service accounts, users holding Keycloak's administration roles (realm `admin`, " +
  '`create-realm`, `realm-management` or `<realm>-realm` client roles) and, for disable and ' +
  "delete, the caller's own account.";

/** The same routes for master users and organization users. */
function realmRoutes(kind: 'platform' | 'organization'): AnyRoute<UsersService>[] {
  const isMaster = kind === 'platform';
  const base = isMaster
    ? '/api/platform/users'
    : '/api/platform/organizations/{organization_id}/users';
  const of = isMaster ? 'Master' : 'Organization';
  const scope: Record<string, PathParam> = isMaster ? {} : { organization_id };
  const realmErrors: ErrorCode[] = isMaster ? [] : ['organizationNotFound'];
  const one = { params: { ...scope, username }, tags: ['users'] };
  const oneErrors: ErrorCode[] = [...realmErrors, 'userNotFound'];
  const change = { ...one, description: PROTECTED_DESCRIPTION, data: userRecord };
  const changeErrors: ErrorCode[] = [...oneErrors, 'protectedAccount'];
  const setEnabled = (verb: 'disable' | 'enable', summary: string) =>
    route({
      method: 'post',
      path: `${base}/{username}/${verb}`,
      operationId: `${verb}${of}User`,
      summary,
      ...change,
      errors: changeErrors,
      audit: { action: `user.${verb}`, target },
      handler: (service, _input, req) =>
        service.setEnabled(realmOf(req), usernameOf(req), verb === 'enable', principalOf(req)),
    });
  return [
    route({
      method: 'get',
      path: base,
      operationId: `list${of}Users`,
      summary: 'List users, by username, one page at a time',
      description:
        '`first` (default 0) and `max` (1 to 1000, default 100) page the list; `search` keeps ' +
        'users whose username, email or name contains it. Other query parameters are 400.',
      tags: ['users'],
      ...(!isMaster && { params: { organization_id } }),
      query: userListQuery,
      data: z.array(userRecord),
      errors: realmErrors,
      handler: (service, { query }, req) => service.list(realmOf(req), query),
    }),
    route({
      method: 'get',
      path: `${base}/{username}`,
      operationId: `get${of}User`,
      summary: 'One user, by username (letter case ignored, as Keycloak does)',
      ...one,
      data: userRecord,
      errors: oneErrors,
      handler: (service, _input, req) => service.get(realmOf(req), usernameOf(req)),
    }),
    route({
      method: 'delete',
      path: `${base}/{username}`,
      operationId: `delete${of}User`,
      summary:
        "Delete a user: the user's tokens stop at once on every replica, then Keycloak deletes it",
      ...change,
      errors: changeErrors,
      audit: { action: 'user.delete', target },
      handler: (service, _input, req) =>
        service.remove(realmOf(req), usernameOf(req), principalOf(req)),
    }),
    setEnabled(
      'disable',
      "Disable a user: the user's tokens stop at once on every replica and its Keycloak " +
        'sessions (online and offline) end',
    ),
    setEnabled('enable', 'Enable a user'),
    route({
      method: 'put',
      path: `${base}/{username}/password`,
      operationId: `setPassword${of}User`,
      summary:
        'Set a new permanent password; cached Basic logins with the old one stop at once, ' +
        'sessions and their tokens stay',
      ...change,
      body: passwordBody,
      errors: changeErrors,
      audit: { action: 'user.password', target },
      handler: (service, { body }, req) =>
        service.setPassword(realmOf(req), usernameOf(req), body.password, principalOf(req)),
    }),
  ];
}

/** Granting and removing role `<ws>`, for organization users. */
const workspaceRole = (verb: 'grant' | 'revoke', summary: string) =>
  route({
    method: verb === 'grant' ? 'put' : 'delete',
    path: '/api/platform/organizations/{organization_id}/users/{username}/workspaces/{workspace_id}',
    operationId: `${verb}WorkspaceRole`,
    summary,
    description: PROTECTED_DESCRIPTION,
    tags: ['users'],
    params: { organization_id, username, workspace_id },
    data: userRecord,
    errors: ['organizationNotFound', 'workspaceNotFound', 'userNotFound', 'protectedAccount'],
    audit: {
      action: `user.${verb}`,
      target: (req) => ({ ...target(req), workspace: String(req.params.workspace_id) }),
    },
    handler: (service, _input, req) =>
      service.setWorkspace(
        realmOf(req),
        usernameOf(req),
        String(req.params.workspace_id),
        verb === 'grant',
        principalOf(req),
      ),
  });

export const usersRoutes = [
  ...realmRoutes('platform'),
  ...realmRoutes('organization'),
  workspaceRole('grant', 'Grant role `<ws>` (idempotent)'),
  workspaceRole(
    'revoke',
    "Remove role `<ws>` (idempotent); the user's tokens issued before stop at once, a " +
      'refreshed token comes without the role',
  ),
];
