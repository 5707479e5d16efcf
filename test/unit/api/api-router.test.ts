import { request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiDeclarations, API_ROUTES, API_TABLES } from '../../../src/api/api-routes.ts';
import { createApiRouter } from '../../../src/api/api.router.ts';
import type { Admission } from '../../../src/auth/admission.ts';
import { createEdge } from '../../../src/edge/edge.ts';
import { compileRoutes } from '../../../src/edge/route.ts';
import { createErrorHandler, notFoundHandler } from '../../../src/envelope/error-handler.ts';
import { AppError } from '../../../src/envelope/errors.ts';
import { createAudit } from '../../../src/http/audit.ts';
import { createLogger } from '../../../src/http/logger.ts';
import { metricsOff } from '../../../src/metrics/metrics.ts';
import { listen } from '../../../src/server.ts';
import { testPrincipal } from '../../helpers/principal.ts';

const principal = testPrincipal({
  userId: 'user-1',
  clientRoles: { 'acme-workspaces': ['ws1'] },
  sessionId: undefined,
  issuedAt: 0,
  expiresAt: Number.MAX_SAFE_INTEGER,
});

/** What answered each request: `<table>.<method>` of a table's service, or the forwarder. */
let served: string[] = [];
/** A table's service whose every method records `<table>.<method>` and answers an empty list. */
const recording = (table: string) =>
  new Proxy(
    {},
    {
      get: (_target, name) => () => (served.push(`${table}.${String(name)}`), Promise.resolve([])),
    },
  ) as never;
/**
 * The tables as declared, each entry's handler standing in for its own: it asks its table's
 * service for its operationId (the services and their inputs are tested elsewhere).
 */
const tables = Object.fromEntries(
  Object.entries(API_TABLES).map(([name, routes]) => [
    name,
    routes.map((route) => ({
      ...route,
      query: undefined,
      body: undefined,
      handler: (service: Record<string, () => Promise<unknown>>) => service[route.operationId]!(),
    })),
  ]),
) as unknown as typeof API_TABLES;
/** The reader's declarations: the stand-in tables, then the document and the forwarded route. */
const declarations = (forwards: boolean) => [
  ...Object.values(tables).flat(),
  ...apiDeclarations(forwards).filter((route) => !API_ROUTES.includes(route as never)),
];
/**
 * The edge, its reader compiled from the tables, and the `/api` router as the gateway wires
 * them, with an admission that admits every route naming a realm (its own tests are elsewhere).
 */
async function startGateway(forwards: boolean): Promise<Server> {
  const logger = createLogger('silent');
  const admission: Admission = {
    admit: (target) => {
      if (target.refusal) throw new AppError(target.refusal);
      return principal;
    },
    challenged: (err) => err,
  };
  const api = createApiRouter({
    admission,
    audit: createAudit(logger, () => '127.0.0.1'),
    services: {
      listing: recording('listing'),
      provisioning: recording('provisioning'),
      users: recording('users'),
      organizationLifecycle: recording('organizationLifecycle'),
      signingKeys: recording('signingKeys'),
      refreshTokens: recording('refreshTokens'),
      auditLog: recording('auditLog'),
      auditDownload: recording('auditDownload'),
      auditRetention: recording('auditRetention'),
      operations: forwards ? undefined : recording('operations'),
    },
    tables,
  });
  const app = express();
  app.use('/api', api);
  app.use(notFoundHandler);
  app.use(createErrorHandler(logger));
  const edge = createEdge({
    logger,
    app,
    routes: compileRoutes(declarations(forwards)),
    forwarded: forwards
      ? (_req, res) => {
          served.push('forwarded');
          res.end();
        }
      : undefined,
    metrics: metricsOff,
  });
  return listen(edge, '127.0.0.1', 0, logger);
}

function send(server: Server, method: string, path: string, body?: string) {
  const { port } = server.address() as AddressInfo;
  served = [];
  const headers =
    body === undefined
      ? {}
      : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const exampleOf = (path: string) =>
  path.replace(/\{([^}]+)\}/g, (_, name: string) => (name === 'workspace_id' ? 'ws1' : 'acme'));

describe.each([false, true])('the /api dispatch, automation route forwarded: %s', (forwards) => {
  let server: Server;
  beforeAll(async () => {
    server = await startGateway(forwards);
  });
  afterAll(async () => {
    await new Promise((resolve) => server?.close(resolve));
  });

  it('hands every table entry, by its path, to its own handler and no other', async () => {
    for (const route of API_ROUTES) {
      const path = exampleOf(route.path);
      const answer = await send(server, route.method.toUpperCase(), path, '{}');
      const automation = route.path.includes('/ita/');
      if (automation && forwards) {
        expect(served, path).toEqual(['forwarded']);
        continue;
      }
      expect(answer.status, `${route.method} ${path} ${answer.text}`).toBe(200);
      const table = Object.entries(API_TABLES).find(([, routes]) =>
        (routes as readonly unknown[]).includes(route),
      )?.[0];
      expect(served, path).toEqual([`${table}.${route.operationId}`]);
    }
  });

  it('answers 404 once admitted where no entry serves the path or method', async () => {
    for (const [method, path] of [
      ['GET', '/api/platform'],
      ['PUT', '/api/platform/organizations'],
      ['GET', '/api/acme/platform/something'],
      ['GET', '/api/acme/WORKSPACES/ws1/ita/menu/operation_list/filter/'],
      ['POST', '/api/openapi.json'],
    ] as const) {
      const answer = await send(server, method, path);
      expect(answer.status, `${method} ${path}`).toBe(404);
      expect(answer.text).toContain('404-00000');
      expect(served).toEqual([]);
    }
  });

  it('refuses an id outside its alphabet before any handler', async () => {
    const org = await send(server, 'GET', '/api/Acme/platform/workspaces');
    expect([org.status, org.text.includes('404-00001')]).toEqual([404, true]);
    expect(served).toEqual([]);
    // (Forwarded, the forward route runs the admission: its own tests show the refusal there.)
    if (forwards) return;
    const ws = await send(
      server,
      'GET',
      '/api/acme/workspaces/w%20s/ita/menu/operation_list/filter/',
    );
    expect([ws.status, ws.text.includes('404-00002')]).toEqual([404, true]);
    expect(served).toEqual([]);
  });

  it('serves the document without credentials, and refuses a malformed body on an entry', async () => {
    const document = await send(server, 'GET', '/api/openapi.json');
    expect(document.status).toBe(200);
    expect((JSON.parse(document.text) as { openapi: string }).openapi).toMatch(/^3\./);
    const broken = await send(server, 'POST', '/api/platform/organizations', '{');
    expect([broken.status, served]).toEqual([400, []]);
  });
});
