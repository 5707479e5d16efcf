import { Router, type Request, type RequestHandler } from 'express';
import type { z } from 'zod';
import { success } from '../envelope/envelope.ts';
import { AppError, type ErrorCode } from '../envelope/errors.ts';
import type { Audit, AuditEntry } from './audit.ts';

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/**
 * A path parameter: its schema, and the refusal when a value fails it. Without `invalid` the
 * value was already checked before the route (the admission reads `/api/<org>/...`), so the
 * schema only documents it.
 */
export interface PathParam {
  schema: z.ZodType<string, string>;
  invalid?: ErrorCode;
}

/** What a handler gets: the path ids, and the query and body parsed by their schemas. */
export interface RouteInput<Q = unknown, B = unknown> {
  params: Record<string, string>;
  query: Q;
  body: B;
}

/**
 * One endpoint, declared once: express is mounted from it (mountRoutes) and the OpenAPI
 * operation is generated from it (api/openapi-routes.ts). `D` is what its handler needs.
 */
export interface RouteSpec<
  D,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
  R extends z.ZodType = z.ZodType,
> {
  method: HttpMethod;
  /** The whole path, OpenAPI style: `/api/platform/organizations/{organization_id}`. */
  path: string;
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
  /**
   * The `data` of a successful answer: the document's schema of it, and the type the handler
   * must return (not checked at run time: the handler's types are the check).
   */
  data: R;
  /** Result codes beyond those of every authenticated call (and of a query or body). */
  errors?: ErrorCode[];
  /** Changes are audited (http/audit.ts); the target names things, never a secret. */
  audit?: { action: string; target: (req: Request) => AuditEntry['target'] };
  /** Answers the `data` of the success envelope. */
  handler: (
    deps: D,
    input: RouteInput<z.output<Q>, z.output<B>>,
    req: Request,
  ) => Promise<z.input<R>>;
}

/** A route of a table; the schemas' types live on in its handler only. */
export type AnyRoute<D> = RouteSpec<D, z.ZodType, z.ZodType, z.ZodType>;

/**
 * The `route` of a table whose handlers need `D`: `const route = routeFor<Deps>()`. Each route
 * it declares has its handler's query, body and answer typed from its own schemas (inferred:
 * the handler must return what `data` describes).
 */
export function routeFor<D>() {
  return <
    Q extends z.ZodType = z.ZodNever,
    B extends z.ZodType = z.ZodNever,
    R extends z.ZodType = z.ZodNever,
  >(
    spec: RouteSpec<D, Q, B, R>,
  ): AnyRoute<D> => spec;
}

/** The `{name}`s of an OpenAPI path, in order. */
export function templateNames(path: string): string[] {
  return [...path.matchAll(/\{([^}]+)\}/g)].map((match) => String(match[1]));
}

/** The express path of an OpenAPI path below `prefix`: `{org}` becomes `:org`. */
export function expressPath(path: string, prefix: string): string {
  if (!path.startsWith(prefix)) throw new Error(`${path} is not below ${prefix}`);
  return path.slice(prefix.length).replace(/\{([^}]+)\}/g, ':$1') || '/';
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

/** Refuses a path id its schema rejects: it names nothing, so no database or Keycloak call. */
function checkParams(params: Record<string, PathParam>): RequestHandler {
  return (req, _res, next) => {
    for (const [name, { schema, invalid }] of Object.entries(params)) {
      if (invalid && !schema.safeParse(req.params[name]).success) {
        next(new AppError(invalid));
        return;
      }
    }
    next();
  };
}

/**
 * An express router of `routes`, whose paths all start with `prefix` (where the router is
 * mounted). Per route: its path ids are checked, then (audited when the route says so) the
 * query and body are parsed, the handler runs, and its result is answered in the envelope.
 * Paths match as written, as the edge reads them (edge/route.ts).
 */
export function mountRoutes<D>(
  routes: readonly AnyRoute<D>[],
  deps: D,
  options: { prefix: string; audit: Audit },
): Router {
  const router = Router({ caseSensitive: true });
  for (const spec of routes) {
    const names = templateNames(spec.path);
    if (names.join() !== Object.keys(spec.params ?? {}).join()) {
      throw new Error(`${spec.method} ${spec.path}: params must name ${names.join(', ')}`);
    }
    const answer = async (req: Request, res: Parameters<RequestHandler>[1]) => {
      const input: RouteInput = {
        params: req.params as Record<string, string>,
        query:
          spec.query &&
          parse(spec.query, req.query, 'query', spec.queryRefusal ?? 'badRequestBody'),
        body: spec.body && parse(spec.body, req.body, 'body', 'badRequestBody', false),
      };
      res.json(success(await spec.handler(deps, input, req)));
    };
    const handler = spec.audit
      ? options.audit.route(spec.audit.action, spec.audit.target, answer)
      : answer;
    router[spec.method](
      expressPath(spec.path, options.prefix),
      checkParams(spec.params ?? {}),
      handler,
    );
  }
  return router;
}
