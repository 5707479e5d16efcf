import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { API_ROUTES, apiDeclarations, OPENAPI_ROUTE } from '../../../src/api/api-routes.ts';
import { FORWARDED_ROUTE } from '../../../src/automation/forward-route.ts';
import { compileRoutes, type Route, type RouteDeclaration } from '../../../src/edge/route.ts';
import { isOrganizationId, isWorkspaceId } from '../../../src/tenancy/identifiers.ts';
import { keywordOf } from '../../helpers/path-fuzz.ts';

/** The reader the gateway compiles, with and without the forwarded route (its `/api` part). */
const readers = {
  forwarded: compileRoutes(apiDeclarations(true)),
  builtIn: compileRoutes(apiDeclarations(false)),
};
const segmentsOf = (path: string) => path.slice(1).split('/');
const read = (method: string, path: string, forwards = false) =>
  (forwards ? readers.forwarded : readers.builtIn)(segmentsOf(path), method);
const find = (method: string, path: string) =>
  API_ROUTES.find((route) => route.method === method && route.path === path);

/** Values for every `{name}` of the tables' paths. */
const EXAMPLES: Record<string, string> = {
  organization_id: 'acme',
  workspace_id: 'ws1',
  username: 'bob',
  id: 'session-1',
  download_id: 'job-1',
};
const exampleOf = (path: string) =>
  path.replace(/\{([^}]+)\}/g, (_, name: string) => EXAMPLES[name] ?? 'x');

describe('the route tables compiled', () => {
  it('reach every entry by its own path and method, HEAD a GET, with or without a last slash', () => {
    for (const route of API_ROUTES) {
      const path = exampleOf(route.path).replace(/\/$/, '');
      const methods = route.method === 'get' ? ['GET', 'HEAD'] : [route.method.toUpperCase()];
      for (const method of methods) {
        for (const written of [path, `${path}/`]) {
          const found = read(method, written);
          expect(found.entry, `${method} ${written}`).toBe(route);
          expect(found.metricsClass).toBe(route.metricsClass);
          const names = [...route.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
          expect(found.params).toEqual(Object.fromEntries(names.map((n) => [n, EXAMPLES[n]])));
        }
      }
    }
  });

  it('hands the whole automation subtree, any method, to the forwarded route when it is on', () => {
    for (const method of ['GET', 'POST', 'DELETE', 'OPTIONS']) {
      for (const path of [
        '/api/acme/workspaces/ws1/ita',
        '/api/acme/workspaces/ws1/ita/menu/operation_list/filter/',
        '/api/acme/workspaces/ws1/ita/a/b/c',
      ]) {
        expect(read(method, path, true)).toEqual({
          entry: FORWARDED_ROUTE,
          params: { organization_id: 'acme', workspace_id: 'ws1' },
          metricsClass: 'forwarded',
          realm: 'acme',
          organization: 'acme',
          workspace: 'ws1',
          refusal: undefined,
        });
      }
    }
    // Off: the built-in operation list serves its one path, nothing else below `ita`.
    const list = find(
      'get',
      '/api/{organization_id}/workspaces/{workspace_id}/ita/menu/operation_list/filter/',
    );
    expect(read('GET', '/api/acme/workspaces/ws1/ita/menu/operation_list/filter').entry).toBe(list);
    expect(read('POST', '/api/acme/workspaces/ws1/ita/menu/operation_list/filter').entry).toBe(
      undefined,
    );
    expect(read('GET', '/api/acme/workspaces/ws1/ita/x').entry).toBe(undefined);
  });

  // Without the /auth table (its token entry is class `token`: test/unit/auth-proxy/auth-routes.test.ts).
  it.each([
    ['GET', '/auth/realms/acme/protocol/openid-connect/certs', 'other'],
    ['GET', '/auth/admin/master/console/', 'other'],
    ['GET', '/readyz', 'other'],
    ['GET', '/API/platform/organizations', 'other'],
  ])('%s %s is outside /api, class %s, no credentials read', (method, path, metricsClass) => {
    expect(read(method, path)).toMatchObject({
      entry: undefined,
      metricsClass,
      realm: undefined,
      refusal: undefined,
    });
  });

  it('serves the document without credentials, on its path only', () => {
    expect(read('GET', '/api/openapi.json')).toMatchObject({
      entry: OPENAPI_ROUTE,
      realm: undefined,
      refusal: undefined,
    });
    expect(read('POST', '/api/openapi.json')).toMatchObject({
      entry: undefined,
      realm: undefined,
      refusal: undefined,
    });
    expect(read('GET', '/api/openapi.json/x')).toMatchObject({
      entry: undefined,
      refusal: 'organizationNotFound',
    });
  });

  it.each([
    ['GET', '/api/platform', 'master'],
    ['GET', '/api/platform/ORGANIZATIONS', 'master'],
    ['PUT', '/api/platform/organizations', 'master'],
    ['DELETE', '/api/acme/platform/users/bob/refresh_tokens/abc', 'acme'],
    ['GET', '/api/acme/platform/something', 'acme'],
    ['GET', '/api/acme/WORKSPACES/ws1/ita/x', 'acme'],
    ['GET', '/api/acme/workspaces/ws1/ITA/x', 'acme'],
    // `platform` names realm master: never an organization, whatever follows.
    ['GET', '/api/platform/workspaces/ws1/ita/x', 'master'],
  ])('%s %s: no entry, realm %s (404 once admitted)', (method, path, realm) => {
    expect(read(method, path, true)).toMatchObject({
      entry: undefined,
      metricsClass: 'other',
      realm,
      refusal: undefined,
    });
  });

  it('reads a username the way express did, a literal sibling notwithstanding', () => {
    expect(read('GET', '/api/platform/users/_current').entry).toBe(
      find('get', '/api/platform/users/{username}'),
    );
    expect(read('GET', '/api/platform/users/_current').params).toEqual({ username: '_current' });
  });

  it('names the realm, organization and workspace the admission checks', () => {
    expect(read('GET', '/api/platform/users')).toMatchObject({
      realm: 'master',
      organization: undefined,
      workspace: undefined,
    });
    expect(read('GET', '/api/acme/WORKSPACES/ws1/ita/x')).toMatchObject({
      realm: 'acme',
      workspace: undefined,
    });
    expect(read('GET', '/api/acme/workspaces/ws1')).toMatchObject({
      entry: undefined,
      realm: 'acme',
      workspace: 'ws1',
    });
  });

  it('refuses ids outside their alphabet, organization first', () => {
    expect(read('GET', '/api/Acme/workspaces/w%20s/ita/x', true)).toMatchObject({
      entry: FORWARDED_ROUTE,
      metricsClass: 'forwarded',
      realm: undefined,
      refusal: 'organizationNotFound',
    });
    expect(read('GET', '/api/acme/workspaces/w s/ita/x', true)).toMatchObject({
      entry: FORWARDED_ROUTE,
      realm: undefined,
      refusal: 'workspaceNotFound',
    });
    expect(read('GET', '/api')).toMatchObject({
      entry: undefined,
      refusal: 'organizationNotFound',
    });
    expect(read('GET', '/api/')).toMatchObject({
      entry: undefined,
      refusal: 'organizationNotFound',
    });
  });

  it('refuses at start a table it would read two ways or not at all', () => {
    const route = (path: string, method: RouteDeclaration['method'] = 'get'): RouteDeclaration => ({
      method,
      path,
      metricsClass: 'other',
    });
    expect(() => compileRoutes([route('/api/things')])).toThrow(/not below/);
    expect(() => compileRoutes([route('/api/{org}/x')])).toThrow(/not below/);
    expect(() => compileRoutes([route('/api/{organization_id}/workspaces/{ws}/x')])).toThrow(
      /not below/,
    );
    expect(() => compileRoutes([route('/other/platform/x')])).toThrow(/not below/);
    expect(() => compileRoutes([route('/api/platform/x'), route('/api/platform/x/')])).toThrow(
      /declared twice/,
    );
    expect(() =>
      compileRoutes([route('/api/platform/x/{a}'), route('/api/platform/x/{b}/y')]),
    ).toThrow(/\{b\} where another path has \{a\}/);
    expect(() =>
      compileRoutes([route('/api/platform/x'), route('/api/platform/x', 'post')]),
    ).not.toThrow();
  });
});

/**
 * Whom a path concerns, written another way (patterns over the whole path, compared as written):
 * the reader must agree with it on every path, keywords in any case included, so every path gets
 * one decision, matched or not.
 */
function expectedScope(
  segments: readonly string[],
): Pick<Route, 'realm' | 'organization' | 'workspace' | 'refusal'> {
  const path = `/${segments.join('/')}`;
  const none = {
    realm: undefined,
    organization: undefined,
    workspace: undefined,
    refusal: undefined,
  };
  if (!/^\/api(\/|$)/.test(path)) return none;
  const api = path.replace(/(.)\/$/, '$1');
  if (api === '/api/openapi.json') return none;
  if (/^\/api\/platform(\/.*)?$/.test(api)) return { ...none, realm: 'master' };
  const [, org = '', rest = ''] = /^\/api\/([^/]*)(\/.*)?$/.exec(api) ?? [];
  if (!isOrganizationId(org)) return { ...none, refusal: 'organizationNotFound' };
  const workspace = /^\/workspaces\/([^/]+)/.exec(rest)?.[1];
  if (workspace !== undefined && !isWorkspaceId(workspace)) {
    return { ...none, organization: org, workspace, refusal: 'workspaceNotFound' };
  }
  return { ...none, realm: org, organization: org, workspace };
}

/** Whether a declaration's template names these segments (a forwarded one: and those below). */
function templateFits(declaration: RouteDeclaration, segments: readonly string[]): boolean {
  const template = declaration.path.slice(1).replace(/\/$/, '').split('/');
  const path = segments[segments.length - 1] === '' ? segments.slice(0, -1) : segments;
  if (declaration.forwarded ? path.length < template.length : path.length !== template.length) {
    return false;
  }
  return template.every((t, i) => t.startsWith('{') || t === path[i]);
}

const KEYWORDS = [
  'api',
  'platform',
  'workspaces',
  'ita',
  'users',
  '_current',
  'refresh_tokens',
  'organizations',
  'openapi.json',
  'token-lifetimes',
  'password',
  'disable',
  'menu',
  'operation_list',
  'filter',
  'auth',
  'realms',
  'protocol',
  'openid-connect',
  'token',
];
const keyword = keywordOf(KEYWORDS);
const segment = fc.oneof(
  { weight: 6, arbitrary: keyword },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'acme',
      'ws1',
      'WS1',
      'w s',
      'x',
      'master',
      'admin',
      '__proto__',
      'constructor',
    ),
  },
  {
    weight: 1,
    arbitrary: fc.string({ minLength: 1, maxLength: 6 }).filter((s) => !s.includes('/')),
  },
);
/** Segments as the edge hands them on: no empty one but maybe the last, mostly under /api. */
const segments = fc
  .tuple(
    fc.constantFrom('api', 'api', 'api', 'auth', 'API', 'healthz'),
    fc.array(segment, { maxLength: 9 }),
    fc.boolean(),
  )
  .map(([first, rest, slash]) => [first, ...rest, ...(slash ? [''] : [])]);
const methods = fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'get');

describe('every path gets one decision', () => {
  it('whom it concerns agrees with the grammar written as patterns, matched or not', () => {
    fc.assert(
      fc.property(methods, segments, fc.boolean(), (method, path, forwards) => {
        const route = (forwards ? readers.forwarded : readers.builtIn)(path, method);
        expect(route).toMatchObject(expectedScope(path));
      }),
      { numRuns: 5000 },
    );
  });

  it('the entry found, if any, is one whose template and method name the request', () => {
    fc.assert(
      fc.property(methods, segments, fc.boolean(), (method, path, forwards) => {
        const route = (forwards ? readers.forwarded : readers.builtIn)(path, method);
        if (route.entry === undefined) {
          expect(route.metricsClass === 'other' || route.metricsClass === 'token').toBe(true);
          return;
        }
        expect(templateFits(route.entry, path), encodeURI(path.join('/'))).toBe(true);
        if (!route.entry.forwarded) {
          const wanted = method === 'HEAD' ? 'GET' : method;
          expect(route.entry.method.toUpperCase()).toBe(wanted);
        }
        expect(route.metricsClass).toBe(route.entry.metricsClass);
        // Parameters come from the path, never from the prototype of an object.
        for (const value of Object.values(route.params)) expect(path).toContain(value);
        // Nothing reaches the forwarded route from realm master.
        if (route.entry.forwarded)
          expect(route.realm === undefined || route.realm === path[1]).toBe(true);
      }),
      { numRuns: 5000 },
    );
  });
});
