import { isOrganizationId, isWorkspaceId, MASTER_REALM } from '../tenancy/identifiers.ts';

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

/** Which route serves a request, as its path (and for the lists, its method) decides. */
export type RouteName =
  /** Not under `/api`: express serves it (`/auth`, `/healthz`, `/readyz`, `/metrics`) or 404. */
  | 'outside'
  /** `/api/openapi.json`, the one `/api` path read without credentials. */
  | 'openapi'
  /** `/api/<org>/workspaces/<ws>/ita/...`: forwarded, or the built-in operation list. */
  | 'automation'
  /** `GET /api/platform/organizations`. */
  | 'organization_list'
  /** `GET /api/<org>/platform/workspaces`. */
  | 'workspace_list'
  /** `/api/platform/users/_current/refresh_tokens` and `/api/<org>/platform/...`, and below. */
  | 'refresh_tokens'
  /** Any other `/api/platform/<...>`: the administrators' routes. */
  | 'platform'
  /** Any other `/api/...`: no route serves it (404 once the caller is admitted). */
  | 'none';

/**
 * A request's path, read once by the edge: which route serves it, its metrics class, and whom it
 * concerns. The admission, the forwarded route, the metrics and the express mounting read this
 * and nothing else of the path.
 */
export interface Route {
  readonly name: RouteName;
  readonly metricsClass: RouteClass;
  /**
   * The realm whose users may call it: `master` under `/api/platform`, `<org>` under
   * `/api/<org>`. Undefined where no credentials are read (outside `/api`, the OpenAPI
   * document) and where `refusal` is set.
   */
  readonly realm: string | undefined;
  /** The organization named by `/api/<org>/...`; undefined under `/api/platform`. */
  readonly organization: string | undefined;
  /** The workspace named by `/api/<org>/workspaces/<ws>/...`. */
  readonly workspace: string | undefined;
  /**
   * An id outside its alphabet names nothing: the admission answers this 404 (`404-00001`,
   * `404-00002`) before anything is looked up.
   */
  readonly refusal: 'organizationNotFound' | 'workspaceNotFound' | undefined;
}

const fixed = (name: RouteName, metricsClass: RouteClass, realm?: string): Route => ({
  name,
  metricsClass,
  realm,
  organization: undefined,
  workspace: undefined,
  refusal: undefined,
});

// The routes every organization shares are values made once: reading them allocates nothing.
const OUTSIDE = fixed('outside', 'other');
const TOKEN = fixed('outside', 'token');
const OPENAPI = fixed('openapi', 'other');
const PLATFORM = {
  platform: fixed('platform', 'provisioning', MASTER_REALM),
  organization_list: fixed('organization_list', 'list', MASTER_REALM),
  refresh_tokens: fixed('refresh_tokens', 'refresh_tokens', MASTER_REALM),
  none: fixed('none', 'other', MASTER_REALM),
} as const;
const NO_ORGANIZATION = {
  ...fixed('none', 'other'),
  refusal: 'organizationNotFound',
} as const satisfies Route;

/**
 * Reads the path's decoded segments (see request-target.ts) the one way every part of the
 * gateway then follows. Segments are compared as written: `platform`, `workspaces`, `ita` in
 * lower case only, as express routes them, so `/api/<org>/WORKSPACES/<ws>/...` names neither a
 * workspace nor a route. One trailing slash changes nothing, as for express. `forwards`: the
 * automation route is forwarded (its metrics class is then `forwarded`, else `list`).
 */
export function readRoute(
  segments: readonly string[],
  method: string | undefined,
  forwards: boolean,
): Route {
  const first = segments[0];
  if (first === 'auth') return isTokenEndpoint(segments) ? TOKEN : OUTSIDE;
  if (first !== 'api') return OUTSIDE;
  // Segments that count: a last empty one (a trailing slash) does not.
  const n = segments[segments.length - 1] === '' ? segments.length - 1 : segments.length;
  const reads = method === 'GET' || method === 'HEAD';
  const org = segments[1] ?? '';
  if (org === 'platform') {
    if (isRefreshTokens(segments, 2, n)) return PLATFORM.refresh_tokens;
    if (n === 3 && reads && segments[2] === 'organizations') return PLATFORM.organization_list;
    return n >= 3 ? PLATFORM.platform : PLATFORM.none;
  }
  if (org === 'openapi.json' && n === 2) return OPENAPI;
  const name = organizationRouteOf(segments, n, reads);
  if (!isOrganizationId(org)) return name === 'none' ? NO_ORGANIZATION : refused(name, forwards);
  const workspace = segments[2] === 'workspaces' && n > 3 ? segments[3] : undefined;
  return {
    name,
    metricsClass: classOf(name, forwards),
    realm: workspace === undefined || isWorkspaceId(workspace) ? org : undefined,
    organization: org,
    workspace,
    refusal: workspace === undefined || isWorkspaceId(workspace) ? undefined : 'workspaceNotFound',
  };
}

/** The route of `/api/<org>/...`, whatever `<org>` is. */
function organizationRouteOf(segments: readonly string[], n: number, reads: boolean): RouteName {
  if (segments[2] === 'workspaces') return n >= 5 && segments[4] === 'ita' ? 'automation' : 'none';
  if (segments[2] !== 'platform') return 'none';
  if (isRefreshTokens(segments, 3, n)) return 'refresh_tokens';
  return n === 4 && reads && segments[3] === 'workspaces' ? 'workspace_list' : 'none';
}

/** `users/_current/refresh_tokens` at `from`, with nothing or one id below. */
function isRefreshTokens(segments: readonly string[], from: number, n: number): boolean {
  return (
    (n === from + 3 || n === from + 4) &&
    segments[from] === 'users' &&
    segments[from + 1] === '_current' &&
    segments[from + 2] === 'refresh_tokens'
  );
}

/** `/auth/realms/<realm>/protocol/openid-connect/token`, where logins and refreshes go. */
function isTokenEndpoint(segments: readonly string[]): boolean {
  return (
    segments.length === 6 &&
    segments[1] === 'realms' &&
    segments[3] === 'protocol' &&
    segments[4] === 'openid-connect' &&
    segments[5] === 'token'
  );
}

function classOf(name: RouteName, forwards: boolean): RouteClass {
  switch (name) {
    case 'automation':
      return forwards ? 'forwarded' : 'list';
    case 'organization_list':
    case 'workspace_list':
      return 'list';
    case 'refresh_tokens':
      return 'refresh_tokens';
    case 'platform':
      return 'provisioning';
    case 'outside':
    case 'openapi':
    case 'none':
      return 'other';
  }
}

/** A route under an organization id outside its alphabet: served by no one but the refusal. */
function refused(name: RouteName, forwards: boolean): Route {
  return { ...NO_ORGANIZATION, name, metricsClass: classOf(name, forwards) };
}
