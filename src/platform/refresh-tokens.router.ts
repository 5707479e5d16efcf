import { z } from 'zod';
import type { ErrorCode } from '../envelope/errors.ts';
import { routeFor, type AnyRoute } from '../http/route-table.ts';
import { callerRealms, pathIds, type RealmVariant } from './path-ids.ts';
import { refreshTokenRecord } from './refresh-tokens.schemas.ts';
import type { RefreshTokensService } from './refresh-tokens.service.ts';

const route = routeFor<RefreshTokensService>({ metricsClass: 'refresh_tokens' });

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

function realmRoutes(variant: RealmVariant): AnyRoute<RefreshTokensService>[] {
  const { suffix, params: scope, errors: orgErrors } = variant;
  const base = `${variant.base}/users/_current/refresh_tokens`;
  const common = { tags: ['tokens'], params: scope };
  // The caller's sessions are its account's, no workspace's: a token narrowed to workspaces
  // lists its own only (authorize.ts `listsSession`) and ends itself only.
  const ending = { ...common, beyondWorkspaces: true as const };
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
      handler: (service, { principal }) => service.list(principal),
    }),
    route({
      method: 'delete',
      path: base,
      operationId: `revokeRefreshTokens${suffix}`,
      summary: 'Revoke all own refresh tokens; their access tokens stop working at once',
      ...ending,
      data: z.null(),
      errors: [...errors, 'revokeFailed'],
      audit: { action: 'refresh_tokens.revoke_all', target: () => ({}) },
      handler: async (service, { principal }) => {
        await service.revokeAll(principal);
        return null;
      },
    }),
    route({
      method: 'delete',
      path: `${base}/{id}`,
      operationId: `revokeRefreshToken${suffix}`,
      summary:
        'Revoke one own refresh token by its id or name (beyond the spec); unknown or foreign ones are 404',
      ...ending,
      params: { ...scope, id: pathIds.refreshTokenId },
      // `realmgate logout` of a read-only login: ending one's own session changes nothing else.
      endsSession: 'id',
      data: z.null(),
      errors: [...errors, 'refreshTokenNotFound', 'revokeFailed'],
      audit: {
        action: 'refresh_tokens.revoke',
        target: ({ params }) => ({ session: String(params.id) }),
      },
      handler: async (service, { principal, params }) => {
        await service.revokeOne(principal, String(params.id));
        return null;
      },
    }),
  ];
}

export const refreshTokensRoutes = callerRealms.flatMap(realmRoutes);
