import { isOrganizationId, isWorkspaceId, MASTER_REALM } from '../tenancy/identifiers.ts';
import {
  ANY_METHOD,
  createSegmentTrie,
  templateSegments,
  type SegmentTrie,
  type TrieServing,
} from './route-trie.ts';

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

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/**
 * What the edge reads of a route table entry (http/route-table.ts adds an `/api` entry's schemas
 * and handler; auth-proxy/auth-routes.ts the guards of an `/auth` one). How its realm is found
 * follows from its path: `/api/platform/...` is realm master, `/api/{organization_id}/...` the
 * organization's realm (`/api/{organization_id}/workspaces/{workspace_id}/...` also names the
 * workspace whose role the caller needs), `/auth/.../{realm}/...` the realm its `{realm}` names.
 */
export interface RouteDeclaration {
  /** Ignored when `forwarded` or `below`; `any` (an `/auth` entry only): whatever the method. */
  readonly method: HttpMethod | 'any';
  /** The whole path, OpenAPI style: `/api/platform/organizations/{organization_id}`. */
  readonly path: string;
  readonly metricsClass: RouteClass;
  /** Forwarded to the automation upstream: this path and every path below it, any method. */
  readonly forwarded?: boolean;
  /** Read without credentials, naming no realm: `/api/<one segment>` only (the API document). */
  readonly open?: boolean;
  /**
   * An `/auth` entry only: serves this path, and every path below it that no other entry
   * serves, whatever the method.
   */
  readonly below?: boolean;
  /**
   * An `/auth` entry only: its literal segments match however the client cases them (where a
   * guard must hold for every spelling: `/auth/ADMIN/`), after those that match as written.
   */
  readonly caseless?: boolean;
  /**
   * An `/api` entry only: without an Authorization header, the credentials may come as the
   * `authorization` field of a form body (a browser's download form cannot set a header; the
   * reference platform's web page downloads so). They are then read as that header would be.
   */
  readonly formCredentials?: boolean;
  /**
   * An `/api` entry only: the `{name}` of its path that names a Keycloak session the call ends.
   * When that is the caller's own session (its token's `sid`), a token of narrowed reach may make
   * the call whatever its reach but its lifetime (auth/reach.ts): a credential can always end
   * itself, and only itself.
   */
  readonly endsSession?: string;
  /**
   * An `/api` entry only: what it serves is no workspace's (the caller's account and its
   * sessions, the whole organization's audit log), so a token narrowed to workspaces is refused
   * it (`403-30001`), as on Keycloak's account through `/auth` (auth/reach.ts), but for ending
   * its own session (`endsSession`).
   */
  readonly beyondWorkspaces?: true;
}

/**
 * A request's path, read once by the edge: the table entry that serves it, its metrics class,
 * and whom it concerns. The admission, the forwarded route, the metrics and the handlers read
 * this and nothing else of the path.
 */
export interface Route {
  /** The entry serving the path and method; undefined: none (404 once the caller is admitted). */
  readonly entry: RouteDeclaration | undefined;
  /** The entry's `{name}`s, as the path gives them (decoded). */
  readonly params: Readonly<Record<string, string>>;
  /** The entry's; `other` where no entry serves the path and method. */
  readonly metricsClass: RouteClass;
  /**
   * The realm whose users may call it: `master` under `/api/platform`, `<org>` under
   * `/api/<org>`; under `/auth`, the realm the entry's `{realm}` names (no credentials are read
   * there: Keycloak reads them). Undefined elsewhere (outside `/api` and `/auth`, an open entry,
   * an `/auth` path no entry with a `{realm}` serves) and where `refusal` is set.
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

/** Reads a request's decoded path segments (request-target.ts) and method into its route. */
export type RouteReader = (segments: readonly string[], method: string | undefined) => Route;

const NO_PARAMS: Readonly<Record<string, string>> = Object.freeze({});
const fixed = (metricsClass: RouteClass, realm?: string): Route => ({
  entry: undefined,
  params: NO_PARAMS,
  metricsClass,
  realm,
  organization: undefined,
  workspace: undefined,
  refusal: undefined,
});
// Routes without a table entry are values made once: reading them allocates nothing.
const OUTSIDE = fixed('other');
const MASTER_NONE = fixed('other', MASTER_REALM);

/** The segment after `/api` that names realm master; any other names an organization. */
const PLATFORM = 'platform';

/**
 * Compiles the route tables' declarations, `/api` and `/auth` alike, into the one reader of
 * paths, once at start. Segments are compared as written (`/api/<org>/WORKSPACES/...` names no
 * route), but for an `/auth` entry declared `caseless`; one trailing slash changes nothing, as
 * for express (and for Keycloak). Throws on a declaration whose path names no realm the way this
 * file reads realms, or that another declaration already serves.
 */
export function compileRoutes(declarations: readonly RouteDeclaration[]): RouteReader {
  const api = createSegmentTrie<RouteDeclaration>();
  const auth = createSegmentTrie<RouteDeclaration>();
  const open = new Map<string, RouteDeclaration>();
  for (const declaration of declarations) {
    const segments = templateSegments(declaration.path);
    if (segments[0] === 'auth' && segments.length > 1) {
      auth.add(segments.slice(1), servingOf(declaration), declaration);
      continue;
    }
    // The /api grammar stays exact: one method, its path as written, nothing below it but forwarded.
    if (declaration.below || declaration.caseless || declaration.method === 'any') {
      throw new Error(`${declaration.path}: below, caseless and any method are for /auth entries`);
    }
    if (declaration.open && segments.length === 2 && segments[0] === 'api') {
      open.set(segments[1]!, declaration);
    } else if (!namesRealm(segments)) {
      throw new Error(
        `${declaration.path} is not below /api/platform, /api/{organization_id} or /auth`,
      );
    }
    api.add(segments.slice(1), servingOf(declaration), declaration);
  }

  return (segments, method = '') => {
    const first = segments[0];
    // Segments that count: a last empty one (a trailing slash) does not.
    const n = segments[segments.length - 1] === '' ? segments.length - 1 : segments.length;
    if (first === 'auth') return authRoute(auth, segments, n, method);
    if (first !== 'api') return OUTSIDE;
    const params: Record<string, string> = {};
    const entry = api.find(segments, 1, n, method, params);
    const metricsClass = entry?.metricsClass ?? 'other';
    const second = segments[1] ?? '';
    if (second === PLATFORM) {
      if (!entry) return MASTER_NONE;
      return { ...MASTER_NONE, entry, params, metricsClass };
    }
    if (n === 2 && open.has(second)) return { ...OUTSIDE, entry, metricsClass };
    const organization = isOrganizationId(second) ? second : undefined;
    const workspace = segments[2] === 'workspaces' && n > 3 ? segments[3] : undefined;
    const refusal =
      organization === undefined
        ? 'organizationNotFound'
        : workspace !== undefined && !isWorkspaceId(workspace)
          ? 'workspaceNotFound'
          : undefined;
    return {
      entry,
      params,
      metricsClass,
      realm: refusal === undefined ? organization : undefined,
      organization,
      workspace: organization === undefined ? undefined : workspace,
      refusal,
    };
  };
}

/** How the trie serves a declaration. */
function servingOf(declaration: RouteDeclaration): TrieServing {
  if (declaration.forwarded) return { subtree: 'shadows' };
  const method = declaration.method === 'any' ? ANY_METHOD : declaration.method;
  if (declaration.below) return { subtree: 'fallback', caseless: declaration.caseless };
  return { method, caseless: declaration.caseless };
}

/** An `/auth` path's route: its entry, its params, and the realm its `{realm}` names. */
function authRoute(
  trie: SegmentTrie<RouteDeclaration>,
  segments: readonly string[],
  n: number,
  method: string,
): Route {
  const params: Record<string, string> = {};
  const entry = trie.find(segments, 1, n, method, params);
  if (!entry) return OUTSIDE;
  return { ...OUTSIDE, entry, params, metricsClass: entry.metricsClass, realm: params.realm };
}

/**
 * Whom a declared `/api` path names, as `compileRoutes` reads a request of it: an organization
 * (`/api/{organization_id}/...`), and a workspace of it (`.../workspaces/{workspace_id}/...`).
 */
export function namedBy(path: string): { organization: boolean; workspace: boolean } {
  const [api, second, third, fourth] = templateSegments(path);
  const organization = api === 'api' && second === '{organization_id}';
  return {
    organization,
    workspace: organization && third === 'workspaces' && fourth !== undefined,
  };
}

/**
 * Whether a template reads the way `compileRoutes` reads realms: below `/api/platform`, or below
 * `/api/{organization_id}` where a workspace, if any, is `/workspaces/{workspace_id}`.
 */
function namesRealm([api, second, third, fourth]: readonly string[]): boolean {
  if (api !== 'api' || third === undefined) return false;
  if (second === PLATFORM) return true;
  return (
    second === '{organization_id}' &&
    (third !== 'workspaces' || fourth === undefined || fourth === '{workspace_id}')
  );
}
