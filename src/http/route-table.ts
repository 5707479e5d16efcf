import { once } from 'node:events';
import type { Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import { principalOf, scopeOf } from '../edge/request-scope.ts';
import type { HttpMethod, RouteClass, RouteDeclaration } from '../edge/route.ts';
import { success } from '../envelope/envelope.ts';
import { AppError, type ErrorCode } from '../envelope/errors.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import type { Principal } from '../tenancy/principal.ts';
import { AnswerCut, type Audit, type AuditEntry } from './audit.ts';

export type { HttpMethod } from '../edge/route.ts';

/**
 * A path parameter: its schema, and the refusal when a value fails it. Without `invalid` the
 * value was already checked before the route (the admission reads `/api/<org>/...`), so the
 * schema only documents it.
 */
export interface PathParam {
  schema: z.ZodType<string, string>;
  invalid?: ErrorCode;
}

/**
 * What a handler gets, in one input: the caller the admission established, the realm the path
 * names (its `{organization_id}`, else master: the master and organization variants of a route
 * share their handler), the path's ids (checked by their schemas), and the query and body parsed
 * by theirs.
 */
export interface RouteInput<Q = unknown, B = unknown> {
  principal: Principal;
  realm: string;
  params: Readonly<Record<string, string>>;
  query: Q;
  body: B;
  /** Hands the audit target what only the handler learns (a setting's value before a change). */
  note: (name: string, value: string) => void;
}

/**
 * What an audit target is made of: the path's realm and ids, the body as it was sent, and what
 * the handler noted (nothing when it failed before).
 */
export interface AuditInput {
  realm: string;
  params: Readonly<Record<string, string>>;
  sent: unknown;
  noted: Readonly<Record<string, string>>;
}

/** What each request's handler noted for its audit target. */
const notes = new WeakMap<Request, Record<string, string>>();
/** The realms each request's change of several realms changed (`audit.realms`). */
const changedRealms = new WeakMap<Request, readonly string[]>();

/**
 * One endpoint, declared once: the edge matches requests with it (edge/route.ts), the API
 * dispatches to its handler (routeHandler) and the OpenAPI operation is generated from it
 * (api/openapi-routes.ts). `D` is what its handler needs.
 */
export interface RouteSpec<
  D,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
  R extends z.ZodType = z.ZodType,
> extends Omit<
  RouteDeclaration,
  'method' | 'metricsClass' | 'forwarded' | 'open' | 'below' | 'caseless'
> {
  method: HttpMethod;
  /** The table's (routeFor) unless the route says otherwise. */
  metricsClass?: RouteClass;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /** One entry per `{name}` of the path, in the order they appear. */
  params?: Record<string, PathParam>;
  /** Refused with `queryRefusal` (default `badRequestBody`) when the query fails it. */
  query?: Q;
  queryRefusal?: ErrorCode;
  /** The JSON body's schema; failing it is 400 `badRequestBody`. Needs `.meta({ id })`. */
  body?: B;
  /** The API does not read the request's body (see `readsBody`): it never answers for one. */
  readsNoBody?: true;
  /**
   * The `data` of a successful answer: the document's schema of it, and the type the handler
   * must return (not checked at run time: the handler's types are the check).
   */
  data: R;
  /** Result codes beyond those of every authenticated call (and of a query or body). */
  errors?: ErrorCode[];
  /**
   * The answer is a `StreamedAnswer` (its `data` is `streamedAnswer`) in one of these content
   * types (each with what it holds), not the envelope: what the document says of a success.
   */
  streams?: Record<string, string>;
  /**
   * Changes are audited (http/audit.ts); the target names things, never a secret. `realms`: for
   * a change of several realms at once, those its answer says it changed.
   */
  audit?: {
    action: string;
    target: (input: AuditInput) => AuditEntry['target'];
    realms?: (data: z.output<R>) => readonly string[];
  };
  /** Answers the `data` of the success envelope. */
  handler: (deps: D, input: RouteInput<z.output<Q>, z.output<B>>) => Promise<z.input<R>>;
}

/**
 * An answer sent as it is made (an export), never whole in memory nor in the envelope: lines
 * (or bytes: a zip) written as the client takes them. `stallMs`: how long the client may hold
 * the answer back in all (each wait for it to take more, added up); past it the answer is cut,
 * and what it holds (a slot of the long reads, a database connection between chunks) is given
 * back.
 */
export class StreamedAnswer {
  readonly contentType: string;
  readonly filename: string;
  readonly lines: AsyncIterable<string | Uint8Array>;
  readonly stallMs: number;

  constructor(
    contentType: string,
    filename: string,
    lines: AsyncIterable<string | Uint8Array>,
    stallMs: number,
  ) {
    this.contentType = contentType;
    this.filename = filename;
    this.lines = lines;
    this.stallMs = stallMs;
  }
}

/** The `data` of a route whose handler answers a `StreamedAnswer` (see `streams`). */
export const streamedAnswer = z.custom<StreamedAnswer>((value) => value instanceof StreamedAnswer);

/** Bytes gathered before a write: few writes, little memory. */
const STREAM_CHUNK = 64 * 1024;

/**
 * Writes a streamed answer, waiting whenever the client is slower; stops if it goes, or once it
 * has held the answer back for the answer's `stallMs` in all, its waits added up: a client that
 * takes nothing, or a little now and then, its connection left open, would otherwise hold the
 * answer (and what it holds) for as long as it likes.
 */
async function sendStreamed(req: Request, res: Response, answer: StreamedAnswer): Promise<void> {
  res.status(200);
  res.setHeader('content-type', answer.contentType);
  res.setHeader('content-disposition', `attachment; filename="${answer.filename}"`);
  let pending = '';
  let heldMs = 0;
  const write = async (chunk: string | Uint8Array) => {
    if (res.write(chunk)) return;
    const done = new AbortController();
    const waited = performance.now();
    const stalled = setTimeout(() => res.destroy(), answer.stallMs - heldMs);
    try {
      await Promise.race([
        once(res, 'drain', { signal: done.signal }),
        once(res, 'close', { signal: done.signal }),
      ]);
    } finally {
      clearTimeout(stalled);
      done.abort();
      heldMs += performance.now() - waited;
    }
  };
  const left = () => new AnswerCut('the client left, or held the answer back too long');
  try {
    for await (const line of answer.lines) {
      if (res.destroyed) throw left();
      if (typeof line !== 'string') {
        if (pending !== '') await write(pending);
        pending = '';
        await write(line);
        continue;
      }
      pending += line;
      if (pending.length >= STREAM_CHUNK) {
        await write(pending);
        pending = '';
      }
    }
    if (res.destroyed) throw left();
    res.end(pending);
  } catch (err) {
    if (!res.headersSent || err instanceof AnswerCut) throw err;
    const cut = new AnswerCut('the answer failed midway', err);
    // Before the connection closes, when the `/api` request's record is made of the scope.
    scopeOf(req).cutResult = cut.result;
    // Too late for an error answer: the client sees the download cut short.
    res.destroy();
    throw cut;
  }
}

/** A route of a table, as the edge and the document read it; its schemas' types live on in its handler only. */
export type AnyRoute<D> = RouteSpec<D, z.ZodType, z.ZodType, z.ZodType> & RouteDeclaration;

/**
 * The `route` of a table whose handlers need `D`: `const route = routeFor<Deps>({ metricsClass })`.
 * Each route it declares has its handler's query, body and answer typed from its own schemas
 * (inferred: the handler must return what `data` describes).
 */
export function routeFor<D>(table: { metricsClass: RouteClass }) {
  return <
    Q extends z.ZodType = z.ZodNever,
    B extends z.ZodType = z.ZodNever,
    R extends z.ZodType = z.ZodNever,
  >(
    spec: RouteSpec<D, Q, B, R>,
  ): AnyRoute<D> => {
    const names = templateNames(spec.path);
    if (names.join() !== Object.keys(spec.params ?? {}).join()) {
      throw new Error(`${spec.method} ${spec.path}: params must name ${names.join(', ')}`);
    }
    if (spec.body && spec.readsNoBody) {
      throw new Error(`${spec.method} ${spec.path}: a route with a body reads it`);
    }
    return { ...spec, metricsClass: spec.metricsClass ?? table.metricsClass } as AnyRoute<D>;
  };
}

/**
 * What reading a request's body answers (api/api.router.ts reads it; envelope/error-handler.ts
 * maps the reader's errors): 413 `payloadTooLarge` over the limit, 400 `badRequestBody` when it
 * is not what its content type says (malformed, an unsupported charset or encoding).
 */
export const BODY_READER_ERRORS = ['badRequestBody', 'payloadTooLarge'] as const;

/**
 * Whether the API reads the body of a request to `route`: on every route, whether it declares a
 * `body` or not (a malformed one is refused all the same), but one declaring `readsNoBody`.
 */
export function readsBody(route: Pick<AnyRoute<never>, 'readsNoBody'>): boolean {
  return route.readsNoBody !== true;
}

/** The `{name}`s of an OpenAPI path, in order. */
export function templateNames(path: string): string[] {
  return [...path.matchAll(/\{([^}]+)\}/g)].map((match) => String(match[1]));
}

/** Validates a query or JSON body; the first few problems become the refusal's message. */
function parse(
  schema: z.ZodType,
  input: unknown,
  what: string,
  refusal: ErrorCode,
  absentIsEmpty = true,
): unknown {
  const parsed = schema.safeParse(absentIsEmpty ? (input ?? {}) : input);
  if (parsed.success) return parsed.data;
  if (refusal !== 'badRequestBody') throw new AppError(refusal);
  const message = parsed.error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.join('.') || what}: ${issue.message}`)
    .join('; ');
  throw new AppError('badRequestBody', { message, data: null });
}

/** The realm a path names: its organization, else master (`/api/platform/...`). */
function realmOf(params: Readonly<Record<string, string>>): string {
  return params.organization_id ?? MASTER_REALM;
}

/** A table with the dependencies of its handlers, ready to be served (api/api.router.ts). */
export interface ServedTable {
  routes: readonly AnyRoute<never>[];
  handlerOf(route: AnyRoute<never>, audit: Audit): RequestHandler;
}

/** `routes` served with `deps`. */
export function serveTable<D>(routes: readonly AnyRoute<D>[], deps: D): ServedTable {
  return {
    routes,
    handlerOf: (route, audit) => routeHandler(route as AnyRoute<D>, deps, audit),
  };
}

/**
 * The express handler of one route, for the request the edge matched to it (its scope carries
 * the params) and the admission admitted: its path ids are checked, then (audited when the
 * route says so) the query and body are parsed, the handler runs, and its result is answered
 * in the envelope.
 */
export function routeHandler<D>(spec: AnyRoute<D>, deps: D, audit: Audit): RequestHandler {
  const checks = Object.entries(spec.params ?? {}).filter(([, param]) => param.invalid);
  const pathOf = (req: Request) => {
    const params = scopeOf(req).route.params;
    return { params, realm: realmOf(params) };
  };
  const answer = async (req: Request, res: Response) => {
    const { params, realm } = pathOf(req);
    const input: RouteInput = {
      principal: principalOf(req),
      realm,
      params,
      query:
        spec.query && parse(spec.query, req.query, 'query', spec.queryRefusal ?? 'badRequestBody'),
      body: spec.body && parse(spec.body, req.body, 'body', 'badRequestBody', false),
      note: (name, value) => {
        const noted = notes.get(req) ?? {};
        noted[name] = value;
        notes.set(req, noted);
      },
    };
    const data = await spec.handler(deps, input);
    if (spec.audit?.realms) changedRealms.set(req, spec.audit.realms(data));
    // What the gateway answers itself is a caller's own (audit records, sessions, lists): no
    // browser or proxy keeps it.
    res.setHeader('cache-control', 'no-store');
    if (data instanceof StreamedAnswer) await sendStreamed(req, res, data);
    else res.json(success(data));
  };
  const audited = spec.audit;
  const handler = audited
    ? audit.route(
        audited.action,
        (req) => audited.target({ ...pathOf(req), sent: req.body, noted: notes.get(req) ?? {} }),
        answer,
        (req) => changedRealms.get(req),
      )
    : answer;
  return (req, res, next) => {
    // A path id its schema rejects names nothing: refused before the audit, the database and Keycloak.
    const { params } = scopeOf(req).route;
    for (const [name, { schema, invalid }] of checks) {
      if (!schema.safeParse(params[name]).success) {
        next(new AppError(invalid!));
        return;
      }
    }
    // Express would catch a rejected handler; here the API's dispatch calls it (api.router.ts).
    // A streamed answer cut has nothing left to answer: only a failure of the gateway's is
    // worth the error handler (its log).
    Promise.resolve(handler(req, res, next)).catch((err: unknown) => {
      if (!(err instanceof AnswerCut)) next(err);
      else if (err.cause !== undefined) next(err.cause);
    });
  };
}
