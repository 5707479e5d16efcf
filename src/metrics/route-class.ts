import { isAutomationPath } from '../automation/forward-route.ts';

/**
 * What kind of route a request took, as the `route` label of the request metrics: a closed
 * list, never the path itself (paths carry organization and workspace ids).
 */
export const ROUTE_CLASSES = [
  'token',
  'forwarded',
  'list',
  'refresh_tokens',
  'provisioning',
  'other',
] as const;

export type RouteClass = (typeof ROUTE_CLASSES)[number];

/**
 * The route class of a request, from the path segments the edge decoded and whether the
 * forwarded automation route claimed it. A few comparisons, no allocation: it runs for every
 * request.
 */
export function routeClassOf(
  segments: readonly string[],
  method: string | undefined,
  forwarded: boolean,
): RouteClass {
  if (forwarded) return 'forwarded';
  const first = segments[0];
  if (first === 'auth') {
    return segments.length === 6 &&
      segments[1] === 'realms' &&
      segments[3] === 'protocol' &&
      segments[4] === 'openid-connect' &&
      segments[5] === 'token'
      ? 'token'
      : 'other';
  }
  if (first !== 'api' || segments.length < 3) return 'other';
  // `/api/platform/...` is the administrators' realm, `/api/<org>/platform/...` an organization's.
  const platformAt = segments[1] === 'platform' ? 1 : segments[2] === 'platform' ? 2 : -1;
  // The automation route when it is not forwarded: the built-in operations list.
  if (platformAt < 0) return isAutomationPath(segments) ? 'list' : 'other';
  if (segments[platformAt + 1] === 'users' && segments[platformAt + 3] === 'refresh_tokens') {
    return 'refresh_tokens';
  }
  const reads = method === 'GET' || method === 'HEAD';
  const listed = platformAt === 1 ? 'organizations' : 'workspaces';
  if (reads && segments.length === platformAt + 2 && segments[platformAt + 1] === listed) {
    return 'list';
  }
  return platformAt === 1 ? 'provisioning' : 'other';
}
