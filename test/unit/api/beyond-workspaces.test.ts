import { describe, expect, it } from 'vitest';
import { API_ROUTES } from '../../../src/api/api-routes.ts';

/**
 * Under an organization's `/api/<org>/platform`, what a token narrowed to workspaces may use is
 * chosen, route by route: the lists that show only what it reaches. Every other route there
 * serves its user's account or the whole organization and must be declared `beyondWorkspaces`,
 * so that a new route is refused to such a token unless it is added here on purpose.
 */
const WITHIN_A_NARROWED_TOKEN = new Set([
  // Only the workspaces it reaches (authorize.ts `listsWorkspace`).
  'listWorkspaces',
  // Only its own refresh token (authorize.ts `listsSession`).
  'listRefreshTokensOrganization',
]);

describe("an organization's platform routes and a token narrowed to workspaces", () => {
  it('declares every route there beyond the workspaces but the lists that show what it reaches', () => {
    const routes = API_ROUTES.filter((route) =>
      route.path.startsWith('/api/{organization_id}/platform/'),
    );
    expect(routes.length).toBeGreaterThan(WITHIN_A_NARROWED_TOKEN.size);
    const undeclared = routes
      .filter((route) => route.beyondWorkspaces !== true)
      .map((route) => route.operationId);
    expect(undeclared.sort()).toEqual([...WITHIN_A_NARROWED_TOKEN].sort());
  });
});
