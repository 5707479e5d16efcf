import express, { type RequestHandler } from 'express';
import type { AddressInfo } from 'node:net';
import type { ReadableStreamReadResult } from 'node:stream/web';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createErrorHandler } from '../../../src/envelope/error-handler.ts';
import { enterScope, scopeOf, type RequestScope } from '../../../src/edge/request-scope.ts';
import { parseRequestTarget, type RequestTarget } from '../../../src/edge/request-target.ts';
import { compileRoutes } from '../../../src/edge/route.ts';
import type { Audit } from '../../../src/http/audit.ts';
import {
  routeFor,
  routeHandler,
  StreamedAnswer,
  streamedAnswer,
} from '../../../src/http/route-table.ts';
import type { Principal } from '../../../src/tenancy/principal.ts';
import { organizationId, workspaceId } from '../../../src/tenancy/id-schemas.ts';

const route = routeFor<string>({ metricsClass: 'provisioning' });

/** What the handlers and the audit saw, in order. */
const seen: string[] = [];
/** Told each audit line as it is recorded (a streamed answer's comes after the client saw it end). */
let onAudit: (line: string) => void = () => undefined;
const audit: Audit = {
  route: (action, _target, handler) => async (req, res) => {
    try {
      await handler(req, res);
      seen.push(`audit ${action} success`);
      onAudit(`audit ${action} success`);
    } catch (err) {
      seen.push(`audit ${action} failure`);
      onAudit(`audit ${action} failure`);
      throw err;
    }
  },
  record: () => undefined,
  keepIn: () => undefined,
};

const organization_id = { schema: organizationId, invalid: 'organizationNotFound' as const };
const workspace_id = { schema: workspaceId, invalid: 'workspaceNotFound' as const };
const body = z.strictObject({ name: z.string().max(5) }).meta({ id: 'TestBody' });
const query = z.object({ confirm: organizationId });

const routes = [
  route({
    method: 'post',
    path: '/api/platform/things/{organization_id}/{workspace_id}',
    operationId: 'createThing',
    summary: 'test',
    tags: [],
    params: { organization_id, workspace_id },
    body,
    data: z.string(),
    audit: { action: 'thing.create', target: () => ({}) },
    handler: (deps, input) => {
      seen.push(`handler ${input.realm} ${input.principal.username} ${input.body.name}`);
      return Promise.resolve(deps);
    },
  }),
  route({
    method: 'delete',
    path: '/api/platform/things/{organization_id}',
    operationId: 'deleteThing',
    summary: 'test',
    tags: [],
    params: { organization_id },
    query,
    queryRefusal: 'organizationDeleteUnconfirmed',
    data: z.null(),
    handler: (_deps, input) => {
      seen.push(`handler confirm ${input.query.confirm}`);
      return Promise.resolve(null);
    },
  }),
  route({
    method: 'get',
    path: '/api/platform/exports/{organization_id}',
    operationId: 'exportThings',
    summary: 'test',
    tags: [],
    params: { organization_id },
    data: streamedAnswer,
    audit: { action: 'thing.export', target: () => ({}) },
    handler: (_deps, input) =>
      Promise.resolve(new StreamedAnswer('text/plain', 'things.txt', linesOf(input.realm), 60_000)),
  }),
  route({
    method: 'get',
    path: '/api/platform/held-exports/{organization_id}',
    operationId: 'exportThingsHeld',
    summary: 'test',
    tags: [],
    params: { organization_id },
    data: streamedAnswer,
    audit: { action: 'thing.export', target: () => ({}) },
    handler: (_deps, input) =>
      Promise.resolve(
        new StreamedAnswer('text/plain', 'things.txt', linesOf(input.realm), HELD_MS),
      ),
  }),
];

/** The `stallMs` of the held exports: far longer than any one wait on a client that reads. */
const HELD_MS = 5000;

/**
 * The lines of a streamed answer: `whole` ends, `broken` fails after more than a write's worth
 * (the headers and the first lines sent), `endless` goes on until its client leaves.
 */
// eslint-disable-next-line @typescript-eslint/require-await -- an async source, as the database's
async function* linesOf(realm: string): AsyncGenerator<string> {
  const line = `${'x'.repeat(1023)}\n`;
  for (let i = 0; realm === 'endless' || i < 100; i++) yield line;
  if (realm === 'broken') throw new Error('the database went away');
}

/** The audit line of the next streamed answer, and what its client received. */
async function download(realm: string, leave = false): Promise<{ audit: string; got: string }> {
  const audited = new Promise<string>((resolve) => (onAudit = resolve));
  const controller = new AbortController();
  const res = await fetch(`${base}/api/platform/exports/${realm}`, { signal: controller.signal });
  let got: string;
  if (leave) {
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    got = 'left';
  } else
    got = await res.text().then(
      () => 'whole',
      () => 'cut',
    );
  return { audit: await audited, got };
}

/** The scope of the last request, as it was when its connection closed. */
let closedScope: RequestScope | undefined;

let base = '';
let close = () => undefined as void;
beforeAll(async () => {
  // What the edge and the admission do before a route's handler: its entry and params, its caller.
  const read = compileRoutes(routes);
  const handlers = new Map(routes.map((spec) => [spec, routeHandler(spec, 'done', audit)]));
  const app = express();
  app.use(
    express.json(),
    ((req, res, next) => {
      const target = parseRequestTarget(req.url) as RequestTarget;
      const route = read(target.segments, req.method);
      const scope = {
        requestId: 'r',
        target,
        route,
        principal: { username: 'alice' } as Principal,
      };
      enterScope(req, scope);
      // As the edge reads it for the audit log: once the connection closes.
      res.on('close', () => (closedScope = { ...scope }));
      next();
    }) satisfies RequestHandler,
    ((req, res, next) => {
      const handler = scopeOf(req).route.entry && handlers.get(scopeOf(req).route.entry as never);
      if (handler) handler(req, res, next);
      else next();
    }) satisfies RequestHandler,
  );
  app.use(createErrorHandler(pino({ level: 'silent' })));
  const server = app.listen(0);
  await new Promise((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => void server.close();
});
afterAll(() => close());

async function call(method: string, path: string, json?: unknown) {
  seen.length = 0;
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { 'content-type': 'application/json' },
    ...(json !== undefined && { body: JSON.stringify(json) }),
  });
  return { status: res.status, body: (await res.json()) as { result: string; data: unknown } };
}

describe('routeHandler', () => {
  it('answers the handler’s result in the envelope, audited', async () => {
    const answer = await call('POST', '/api/platform/things/org-1/ws-1', { name: 'ab' });
    expect(answer).toMatchObject({ status: 200, body: { result: '000-00000', data: 'done' } });
    expect(seen).toEqual(['handler org-1 alice ab', 'audit thing.create success']);
  });

  it('refuses a path id its schema rejects before the audit and the handler, in path order', async () => {
    expect(
      (await call('POST', '/api/platform/things/master/-ws', { name: 'ab' })).body.result,
    ).toBe('404-00001');
    expect((await call('POST', '/api/platform/things/org-1/-ws', { name: 'ab' })).body.result).toBe(
      '404-00002',
    );
    expect(seen).toEqual([]);
  });

  it('refuses a body its schema rejects with 400-00002, as an audited failure', async () => {
    const answer = await call('POST', '/api/platform/things/org-1/ws-1', { name: 'too long' });
    expect(answer.status).toBe(400);
    expect(answer.body.result).toBe('400-00002');
    expect(seen).toEqual(['audit thing.create failure']);
  });

  it('refuses a query its schema rejects with the route’s own refusal', async () => {
    for (const q of ['', '?confirm=Bad', '?confirm=a&confirm=a']) {
      expect((await call('DELETE', `/api/platform/things/org-1${q}`)).body.result, q).toBe(
        '400-23001',
      );
    }
    expect((await call('DELETE', '/api/platform/things/org-1?confirm=org-2')).status).toBe(200);
    expect(seen).toEqual(['handler confirm org-2']);
  });

  it('records a streamed answer as a success only when it was sent to its end', async () => {
    expect(await download('whole')).toEqual({ audit: 'audit thing.export success', got: 'whole' });
    // Failed once its headers were sent: the client sees it cut, the audit a failure.
    expect(await download('broken')).toEqual({ audit: 'audit thing.export failure', got: 'cut' });
    // The client gone midway: not all of it was delivered.
    expect(await download('endless', true)).toEqual({
      audit: 'audit thing.export failure',
      got: 'left',
    });
  });

  it('cuts an endless answer its client takes a little at a time once its waits add up to stallMs', async () => {
    const audited = new Promise<string>((resolve) => (onAudit = resolve));
    const res = await fetch(`${base}/api/platform/held-exports/endless`);
    const reader = res.body!.getReader();
    // Far more than is read before the waits add up to HELD_MS, at this pace.
    const enough = 256 * 1024 * 1024;
    let read = 0;
    const got = await (async () => {
      try {
        while (read < enough) {
          const chunk: ReadableStreamReadResult<Uint8Array> = await reader.read();
          if (chunk.done) return 'whole';
          read += chunk.value.length;
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
        await reader.cancel();
        return 'still sent';
      } catch {
        return 'cut';
      }
    })();
    expect({ got, audit: await audited }).toEqual({
      got: 'cut',
      audit: 'audit thing.export failure',
    });
  }, 120_000);

  it("tells the request's scope the result of the failure that cut its answer, before it closes", async () => {
    await download('broken');
    await expect.poll(() => closedScope?.cutResult).toBe('500-99999');
    // The client gone: nothing of the gateway's cut it.
    closedScope = undefined;
    await download('endless', true);
    await expect.poll(() => closedScope).toBeDefined();
    expect(closedScope!.cutResult).toBeUndefined();
  });

  it('refuses a route whose params do not name the path’s', () => {
    const [first] = routes;
    expect(() => route({ ...first!, params: { organization_id } } as never)).toThrow(
      /params must name organization_id, workspace_id/,
    );
  });
});
