import { request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { Router } from 'express';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiRouter } from '../../../src/api/api.router.ts';
import type { Admission } from '../../../src/auth/admission.ts';
import type { Principal } from '../../../src/tenancy/principal.ts';
import { createEdge } from '../../../src/edge/edge.ts';
import { createForwarding } from '../../../src/edge/forwarding.ts';
import { encodeSegment } from '../../../src/edge/request-target.ts';
import { readRoute, type RouteName } from '../../../src/edge/route.ts';
import { createErrorHandler, notFoundHandler } from '../../../src/envelope/error-handler.ts';
import { AppError } from '../../../src/envelope/errors.ts';
import { createAudit } from '../../../src/http/audit.ts';
import { createLogger } from '../../../src/http/logger.ts';
import { metricsOff } from '../../../src/metrics/metrics.ts';
import { listen } from '../../../src/server.ts';

const principal: Principal = {
  realm: 'acme',
  userId: 'user-1',
  username: 'alice',
  realmRoles: [],
  clientRoles: { 'acme-workspaces': ['ws1'] },
  locale: undefined,
  method: 'bearer',
  sessionId: undefined,
  issuedAt: 0,
  expiresAt: Number.MAX_SAFE_INTEGER,
};

/** Which router answered each request: what this suite checks against the edge's reading. */
let served: string[] = [];
const serve = (name: string) => {
  served.push(name);
  return Promise.resolve([]);
};

/**
 * The `/api` router and the edge as the gateway wires them, with services that only record who
 * was called (a test of the routing, not of the services), and an admission that admits every
 * route naming a realm (its own tests are elsewhere).
 */
async function startGateway(forwards: boolean): Promise<Server> {
  const logger = createLogger('silent');
  const forwarding = createForwarding(undefined);
  const admission: Admission = {
    peek: (target) => (target.realm === undefined ? undefined : principal),
    admit: (target) =>
      target.refusal ? Promise.reject(new AppError(target.refusal)) : Promise.resolve(principal),
  };
  const api = createApiRouter({
    admission,
    forwarding,
    audit: createAudit(logger, () => '127.0.0.1'),
    refreshTokens: {
      list: () => serve('refresh_tokens'),
      revokeAll: () => serve('refresh_tokens').then(() => undefined),
      revokeOne: () => serve('refresh_tokens').then(() => undefined),
    },
    organizations: { list: () => serve('organization_list') } as never,
    workspaces: { listByOrganization: () => serve('workspace_list') } as never,
    operations: { listByWorkspace: () => serve('automation') } as never,
    platformRouter: Router().use((_req, res) => {
      served.push('platform');
      res.json({});
    }),
    builtInOperations: !forwards,
  });
  const app = express();
  app.set('case sensitive routing', true);
  app.use('/api', api);
  app.use(notFoundHandler);
  app.use(createErrorHandler(logger));
  const forwarded = (_req: unknown, res: { end(): void }) => {
    served.push('forwarded');
    res.end();
  };
  const edge = createEdge({
    logger,
    app,
    forwarded: forwards ? forwarded : undefined,
    metrics: metricsOff,
  });
  return listen(edge, '127.0.0.1', 0, logger);
}

function send(server: Server, method: string, segments: string[]): Promise<number> {
  const { port } = server.address() as AddressInfo;
  const path = `/${segments.map(encodeSegment).join('/')}`;
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

const WORDS = [
  'api',
  'platform',
  'workspaces',
  'ita',
  'menu',
  'operation_list',
  'filter',
  'users',
  '_current',
  'refresh_tokens',
  'organizations',
  'openapi.json',
  'acme',
  'ws1',
  'x',
];
const word = fc
  .tuple(fc.constantFrom(...WORDS), fc.nat(4))
  .map(([w, often]) => (often === 0 ? w.toUpperCase() : w));
/** The paths routes serve, each segment sometimes in capitals, cut short or made longer. */
const ROUTES = [
  'platform/organizations',
  'acme/platform/workspaces',
  'platform/users/_current/refresh_tokens/s1',
  'acme/platform/users/_current/refresh_tokens/s1',
  'acme/workspaces/ws1/ita/menu/operation_list/filter',
  'platform/organizations/acme/workspaces',
  'openapi.json',
].map((path) => path.split('/'));
const nearRoutes = fc
  .tuple(
    fc.constantFrom(...ROUTES),
    fc.option(fc.nat(7)),
    fc.option(fc.integer({ min: 1, max: 7 })),
    fc.option(word),
  )
  .map(([route, capital, keep, more]) => [
    ...route.slice(0, keep ?? route.length).map((w, i) => (i === capital ? w.toUpperCase() : w)),
    ...(more === null ? [] : [more]),
  ]);
const paths = fc
  .tuple(fc.oneof(nearRoutes, fc.array(word, { minLength: 1, maxLength: 8 })), fc.boolean())
  .map(([rest, slash]) => ['api', ...rest, ...(slash ? [''] : [])]);
const methods = fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'DELETE');

describe.each([false, true])('the /api routers, automation route forwarded: %s', (forwards) => {
  let server: Server;
  beforeAll(async () => {
    server = await startGateway(forwards);
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
  });

  it('no router but the one the edge read from the path ever answers, in any case', async () => {
    const routerOf = (name: RouteName) => (name === 'automation' && forwards ? 'forwarded' : name);
    await fc.assert(
      fc.asyncProperty(methods, paths, async (method, segments) => {
        served = [];
        const status = await send(server, method, segments);
        const expected = routerOf(readRoute(segments, method, forwards).name);
        expect(served.every((name) => name === expected)).toBe(true);
        expect(served.length).toBeLessThanOrEqual(1);
        // The OpenAPI document is the api router's own answer.
        const documented = expected === 'openapi' && (method === 'GET' || method === 'HEAD');
        if (served.length === 0) expect(status >= 400).toBe(!documented);
        if (expected === 'forwarded') expect(served).toEqual(['forwarded']);
      }),
      { numRuns: 1000 },
    );
  });

  it('serves each route by its own router', async () => {
    const cases: [string, string, string][] = [
      ['GET', '/api/platform/organizations', 'organization_list'],
      ['GET', '/api/acme/platform/workspaces/', 'workspace_list'],
      ['DELETE', '/api/acme/platform/users/_current/refresh_tokens/s1', 'refresh_tokens'],
      ['POST', '/api/platform/organizations', 'platform'],
      [
        'GET',
        '/api/acme/workspaces/ws1/ita/menu/operation_list/filter/',
        forwards ? 'forwarded' : 'automation',
      ],
    ];
    for (const [method, path, name] of cases) {
      served = [];
      expect(await send(server, method, path.slice(1).split('/'))).toBe(200);
      expect(served).toEqual([name]);
    }
  });
});
