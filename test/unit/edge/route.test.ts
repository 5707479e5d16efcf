import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readRoute, type Route, type RouteClass, type RouteName } from '../../../src/edge/route.ts';
import { isOrganizationId, isWorkspaceId } from '../../../src/tenancy/identifiers.ts';

const segmentsOf = (path: string) => path.slice(1).split('/');
const read = (method: string, path: string, forwards = false) =>
  readRoute(segmentsOf(path), method, forwards);

describe('readRoute', () => {
  it.each([
    ['POST', '/auth/realms/acme/protocol/openid-connect/token', 'outside', 'token'],
    ['GET', '/auth/realms/acme/protocol/openid-connect/certs', 'outside', 'other'],
    ['GET', '/auth/admin/master/console/', 'outside', 'other'],
    ['GET', '/readyz', 'outside', 'other'],
    ['GET', '/metrics', 'outside', 'other'],
    ['GET', '/API/platform/organizations', 'outside', 'other'],
    ['GET', '/api/openapi.json', 'openapi', 'other'],
    ['GET', '/api/platform/organizations', 'organization_list', 'list'],
    ['HEAD', '/api/platform/organizations/', 'organization_list', 'list'],
    ['POST', '/api/platform/organizations', 'platform', 'provisioning'],
    ['GET', '/api/platform/ORGANIZATIONS', 'platform', 'provisioning'],
    ['GET', '/api/acme/platform/workspaces', 'workspace_list', 'list'],
    ['GET', '/api/acme/workspaces/ws1/ita/menu/operation_list/filter', 'automation', 'list'],
    ['GET', '/api/platform/users/_current/refresh_tokens', 'refresh_tokens', 'refresh_tokens'],
    [
      'DELETE',
      '/api/acme/platform/users/_current/refresh_tokens/abc',
      'refresh_tokens',
      'refresh_tokens',
    ],
    ['DELETE', '/api/acme/platform/users/bob/refresh_tokens/abc', 'none', 'other'],
    ['PATCH', '/api/platform/token-lifetimes', 'platform', 'provisioning'],
    ['POST', '/api/platform/organizations/acme/workspaces', 'platform', 'provisioning'],
    ['GET', '/api/platform', 'none', 'other'],
    ['GET', '/api/acme/platform/something', 'none', 'other'],
    ['GET', '/api/acme/WORKSPACES/ws1/ita/x', 'none', 'other'],
    ['GET', '/api/acme/workspaces/ws1/ITA/x', 'none', 'other'],
  ])('%s %s is route %s, class %s', (method, path, name, metricsClass) => {
    expect(read(method, path)).toMatchObject({ name, metricsClass });
  });

  it('names the realm, organization and workspace the admission checks', () => {
    expect(read('GET', '/api/platform/users')).toMatchObject({
      realm: 'master',
      organization: undefined,
      workspace: undefined,
    });
    expect(read('GET', '/api/acme/workspaces/ws1/ita/x', true)).toEqual({
      name: 'automation',
      metricsClass: 'forwarded',
      realm: 'acme',
      organization: 'acme',
      workspace: 'ws1',
      refusal: undefined,
    });
    expect(read('GET', '/api/acme/WORKSPACES/ws1/ita/x')).toMatchObject({
      realm: 'acme',
      workspace: undefined,
    });
    expect(read('GET', '/api/openapi.json')).toMatchObject({
      realm: undefined,
      refusal: undefined,
    });
  });

  it('refuses ids outside their alphabet, organization first', () => {
    expect(read('GET', '/api/Acme/workspaces/w%20s/ita/x')).toMatchObject({
      name: 'automation',
      realm: undefined,
      refusal: 'organizationNotFound',
    });
    expect(read('GET', '/api/acme/workspaces/w s/ita/x')).toMatchObject({
      name: 'automation',
      realm: undefined,
      refusal: 'workspaceNotFound',
    });
    expect(read('GET', '/api')).toMatchObject({ name: 'none', refusal: 'organizationNotFound' });
  });
});

/**
 * The path grammar again, written another way (patterns over the whole path, compared as
 * written, as express compares them): `readRoute` must agree with it on every path, keywords in
 * any case included, so every path gets one decision.
 */
function expected(method: string, segments: readonly string[], forwards: boolean): Route {
  const path = `/${segments.join('/')}`;
  const route = (name: RouteName, metricsClass: RouteClass, fields: Partial<Route> = {}) => ({
    name,
    metricsClass,
    realm: undefined,
    organization: undefined,
    workspace: undefined,
    refusal: undefined,
    ...fields,
  });
  if (/^\/auth\/realms\/[^/]*\/protocol\/openid-connect\/token$/.test(path)) {
    return route('outside', 'token');
  }
  if (!/^\/api(\/|$)/.test(path)) return route('outside', 'other');
  const api = path.replace(/(.)\/$/, '$1');
  const reads = method === 'GET' || method === 'HEAD';
  const refreshTokens = /^\/users\/_current\/refresh_tokens(\/[^/]*)?$/;
  if (api === '/api/openapi.json') return route('openapi', 'other');
  const master = /^\/api\/platform(\/.*)?$/.exec(api);
  if (master) {
    const rest = master[1] ?? '';
    const realm = { realm: 'master' };
    if (refreshTokens.test(rest)) return route('refresh_tokens', 'refresh_tokens', realm);
    if (reads && rest === '/organizations') return route('organization_list', 'list', realm);
    return rest === '' ? route('none', 'other', realm) : route('platform', 'provisioning', realm);
  }
  const [, org = '', rest = ''] = /^\/api\/([^/]*)(\/.*)?$/.exec(api) ?? [];
  let name: RouteName = 'none';
  let metricsClass: RouteClass = 'other';
  if (/^\/workspaces\/[^/]+\/ita(\/.*)?$/.test(rest)) {
    [name, metricsClass] = ['automation', forwards ? 'forwarded' : 'list'];
  } else if (/^\/platform\/users\/_current\/refresh_tokens(\/[^/]*)?$/.test(rest)) {
    [name, metricsClass] = ['refresh_tokens', 'refresh_tokens'];
  } else if (reads && rest === '/platform/workspaces') {
    [name, metricsClass] = ['workspace_list', 'list'];
  }
  if (!isOrganizationId(org)) return route(name, metricsClass, { refusal: 'organizationNotFound' });
  const workspace = /^\/workspaces\/([^/]+)/.exec(rest)?.[1];
  if (workspace !== undefined && !isWorkspaceId(workspace)) {
    return route(name, metricsClass, {
      organization: org,
      workspace,
      refusal: 'workspaceNotFound',
    });
  }
  return route(name, metricsClass, { realm: org, organization: org, workspace });
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
  'auth',
  'realms',
  'protocol',
  'openid-connect',
  'token',
];

/** A keyword, mostly as written, sometimes in other cases. */
const keyword = fc
  .tuple(fc.constantFrom(...KEYWORDS), fc.array(fc.boolean(), { maxLength: 16 }), fc.nat(3))
  .map(([word, upper, often]) =>
    often === 0 ? [...word].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join('') : word,
  );
const segment = fc.oneof(
  { weight: 6, arbitrary: keyword },
  { weight: 3, arbitrary: fc.constantFrom('acme', 'ws1', 'WS1', 'w s', 'x', 'master', 'admin') },
  {
    weight: 1,
    arbitrary: fc.string({ minLength: 1, maxLength: 6 }).filter((s) => !s.includes('/')),
  },
);
/** Segments as the edge hands them on: no empty one but maybe the last, mostly under /api. */
const segments = fc
  .tuple(
    fc.constantFrom('api', 'api', 'api', 'auth', 'API', 'healthz'),
    fc.array(segment, { maxLength: 8 }),
    fc.boolean(),
  )
  .map(([first, rest, slash]) => [first, ...rest, ...(slash ? [''] : [])]);
const methods = fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'get');

describe('every path gets one decision', () => {
  it('agrees with the grammar written as patterns, keywords in any case included', () => {
    fc.assert(
      fc.property(methods, segments, fc.boolean(), (method, path, forwards) => {
        expect(readRoute(path, method, forwards)).toEqual(expected(method, path, forwards));
      }),
      { numRuns: 5000 },
    );
  });

  it('names a workspace on every path the automation route serves, or refuses it', () => {
    fc.assert(
      fc.property(methods, segments, (method, path) => {
        const route = readRoute(path, method, true);
        if (route.name === 'automation' && route.refusal === undefined) {
          expect(route.workspace).toBe(path[3]);
          expect(route.realm).toBe(path[1]);
        }
        // A realm to check credentials against, or a refusal, on every route but two.
        const open = route.name === 'outside' || route.name === 'openapi';
        expect(open || route.realm !== undefined || route.refusal !== undefined).toBe(true);
        expect(route.realm !== undefined && route.refusal !== undefined).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });
});
