import { z } from 'zod';
import { principalOf } from '../edge/request-scope.ts';
import type { ErrorCode } from '../envelope/errors.ts';
import { routeFor, type AnyRoute, type PathParam } from '../http/route-table.ts';
import { pathIds } from './path-ids.ts';
import { refreshTokenRecord } from './refresh-tokens.schemas.ts';
import type { RefreshTokensService } from './refresh-tokens.service.ts';

const route = routeFor<RefreshTokensService>();

/**
 * The caller's refresh tokens (spec 4.5, 4.6), for administrators
 * (`/api/platform/users/_current/refresh_tokens`) and organization users
 * (`/api/<org>/platform/users/_current/refresh_tokens`). `DELETE .../<id>` revokes one of them
 * (beyond the spec).
 */
const TOKEN_ERRORS: ErrorCode[] = [
  'gatewayServiceToken',
  'offlineSessionsUnreadable',
  'realmUnreadable',
];

function realmRoutes(kind: 'platform' | 'organization'): AnyRoute<RefreshTokensService>[] {
  const isMaster = kind === 'platform';
  const suffix = isMaster ? 'Master' : 'Organization';
  const base = isMaster
    ? '/api/platform/users/_current/refresh_tokens'
    : '/api/{organization_id}/platform/users/_current/refresh_tokens';
  const scope: Record<string, PathParam> = isMaster
    ? {}
    : { organization_id: pathIds.callerOrganization };
  // An organization's own calls (`/api/<org>/...`) are also refused while it is disabled.
  const orgErrors: ErrorCode[] = isMaster ? [] : ['organizationNotFound', 'organizationDisabled'];
  const common = { tags: ['tokens'], params: scope };
  const errors = [...orgErrors, ...TOKEN_ERRORS];
  return [
    route({
      method: 'get',
      path: base,
      operationId: `listRefreshTokens${suffix}`,
      summary: 'List own refresh tokens',
      ...common,
      data: z.array(refreshTokenRecord),
      errors,
      handler: (service, _input, req) => service.list(principalOf(req)),
    }),
    route({
      method: 'delete',
      path: base,
      operationId: `revokeRefreshTokens${suffix}`,
      summary: 'Revoke all own refresh tokens; their access tokens stop working at once',
      ...common,
      data: z.null(),
      errors: [...errors, 'revokeFailed'],
      audit: { action: 'refresh_tokens.revoke_all', target: () => ({}) },
      handler: async (service, _input, req) => {
        await service.revokeAll(principalOf(req));
        return null;
      },
    }),
    route({
      method: 'delete',
      path: `${base}/{id}`,
      operationId: `revokeRefreshToken${suffix}`,
      summary: 'Revoke one own refresh token (beyond the spec); unknown or foreign ids are 404',
      ...common,
      params: { ...scope, id: pathIds.refreshTokenId },
      data: z.null(),
      errors: [...errors, 'refreshTokenNotFound', 'revokeFailed'],
      audit: {
        action: 'refresh_tokens.revoke',
        target: (req) => ({ session: String(req.params.id) }),
      },
      handler: async (service, _input, req) => {
        await service.revokeOne(principalOf(req), String(req.params.id));
        return null;
      },
    }),
  ];
}

export const refreshTokensRoutes = [...realmRoutes('platform'), ...realmRoutes('organization')];
