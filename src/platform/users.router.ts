import { z } from 'zod';
import type { ErrorCode } from '../envelope/errors.ts';
import { routeFor, type AnyRoute, type AuditInput } from '../http/route-table.ts';
import { administeredRealms, pathIds, type RealmVariant } from './path-ids.ts';
import { passwordBody, userListQuery, userRecord } from './users.schemas.ts';
import type { UsersService } from './users.service.ts';

const route = routeFor<UsersService>({ metricsClass: 'provisioning' });

/**
 * The user lifecycle (list, get, disable, enable, delete, password, workspace roles) under
 * `/api/platform`: master users under `/users`, an organization's under
 * `/organizations/{organization_id}/users` (master-realm callers only). Every change is
 * audited, its target naming the realm and user, never a password.
 */
const { organization_id, workspace_id, username } = pathIds;
const target = ({ realm, params }: Pick<AuditInput, 'realm' | 'params'>) => ({
  realm,
  username: String(params.username),
});

const PROTECTED_DESCRIPTION =
  "Refused with 403 `403-00002`, changing nothing, for Keycloak's bootstrap administrator, " +
  "service accounts, users holding Keycloak's administration roles (realm `admin`, " +
  '`create-realm`, `realm-management` or `<realm>-realm` client roles) and, for disable and ' +
  "delete, the caller's own account.";

/** The same routes for master users and organization users. */
function realmRoutes(variant: RealmVariant): AnyRoute<UsersService>[] {
  const { suffix: of, params: scope, errors: realmErrors } = variant;
  const base = `${variant.base}/users`;
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
      handler: (service, { realm, params, principal }) =>
        service.setEnabled(realm, String(params.username), verb === 'enable', principal),
    });
  return [
    route({
      method: 'get',
      path: base,
      operationId: `list${of}Users`,
      summary: 'List users, by username, one page at a time',
      description:
        '`first` (default 0) and `max` (1 to 1000, default 100) page the list; `search` keeps ' +
        "users whose username, email, first or last name begins with it (Keycloak's search: `*` " +
        'matches any characters, so `*text*` finds it anywhere). Other query parameters are 400.',
      tags: ['users'],
      params: scope,
      query: userListQuery,
      data: z.array(userRecord),
      errors: realmErrors,
      handler: (service, { realm, query }) => service.list(realm, query),
    }),
    route({
      method: 'get',
      path: `${base}/{username}`,
      operationId: `get${of}User`,
      summary: 'One user, by username (letter case ignored, as Keycloak does)',
      ...one,
      data: userRecord,
      errors: oneErrors,
      handler: (service, { realm, params }) => service.get(realm, String(params.username)),
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
      handler: (service, { realm, params, principal }) =>
        service.remove(realm, String(params.username), principal),
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
      handler: (service, { realm, params, body, principal }) =>
        service.setPassword(realm, String(params.username), body.password, principal),
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
    errors: [
      'organizationNotFound',
      'workspaceNotFound',
      'userNotFound',
      'protectedAccount',
      // Removing a role the user also holds through a group or a composite role.
      ...(verb === 'revoke' ? (['workspaceHeldElsewhere'] as const) : []),
    ],
    audit: {
      action: `user.${verb}`,
      target: (input) => ({ ...target(input), workspace: String(input.params.workspace_id) }),
    },
    handler: (service, { realm, params, principal }) =>
      service.setWorkspace(
        realm,
        String(params.username),
        String(params.workspace_id),
        verb === 'grant',
        principal,
      ),
  });

export const usersRoutes = [
  ...administeredRealms.flatMap(realmRoutes),
  workspaceRole('grant', 'Grant role `<ws>` (idempotent)'),
  workspaceRole(
    'revoke',
    "Remove role `<ws>` (idempotent); the user's tokens issued before stop at once, a " +
      'refreshed token comes without the role; 409 when the user still holds it through a ' +
      'group or a composite role set in Keycloak',
  ),
];
