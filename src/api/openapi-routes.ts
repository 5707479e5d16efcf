import { z } from 'zod';
import type { ErrorCode } from '../envelope/errors.ts';
import type { AnyRoute } from '../http/route-table.ts';
import {
  errorResponses,
  json,
  success,
  type OpenApiOperation,
  type OpenApiPaths,
} from './openapi-answers.ts';
import { arrayOf, schema } from './openapi-schemas.ts';
import { jsonSchemaOf, type JsonValue } from './openapi-zod.ts';

/** A route of any table: the document reads its declaration, never calls its handler. */
export type DeclaredRoute = AnyRoute<never>;

/** Either scheme works on every platform and automation API (spec 4, 5). */
export const API_SECURITY: Record<string, string[]>[] = [{ basicAuth: [] }, { bearerAuth: [] }];

/**
 * Every authenticated call can fail on the header, the credentials, an absent Keycloak or an
 * absent database (organizations are looked up there).
 */
const AUTH_ERRORS: ErrorCode[] = [
  'badRequestHeader',
  'authenticationFailed',
  'tooManyFailedLogins',
  'identityProviderUnavailable',
  'databaseUnavailable',
  'unexpected',
];

/** Every result code a route can answer: the declared ones, those of its query and body. */
export function resultCodesOf(route: DeclaredRoute): ErrorCode[] {
  const codes = [...AUTH_ERRORS, ...(route.errors ?? [])];
  if (route.query) codes.push(route.queryRefusal ?? 'badRequestBody');
  if (route.body) codes.push('badRequestBody');
  return [...new Set(codes)];
}

/** Path parameters (in template order), then the query's, each from its zod schema. */
function parametersOf(route: DeclaredRoute): JsonValue[] {
  const path = Object.entries(route.params ?? {}).map(([name, param]) => ({
    name,
    in: 'path',
    required: true,
    schema: jsonSchemaOf(param.schema, 'input'),
  }));
  const shape = (route.query as z.ZodObject | undefined)?.shape ?? {};
  const query = Object.entries(shape).map(([name, field]) => ({
    name,
    in: 'query',
    // A field with a default or `.optional()` accepts an absent value.
    required: !(field as z.ZodType).safeParse(undefined).success,
    schema: jsonSchemaOf(field as z.ZodType, 'input'),
  }));
  return [...path, ...query];
}

function dataOf(route: DeclaredRoute): JsonValue {
  const { data } = route;
  if ('component' in data && typeof data.component === 'string') {
    return data.array ? arrayOf(schema(data.component)) : schema(data.component);
  }
  return jsonSchemaOf(data as z.ZodType, 'output');
}

/** The OpenAPI operation of a declared route: an authenticated call answering in the envelope. */
export function operationOf(route: DeclaredRoute): OpenApiOperation {
  const parameters = parametersOf(route);
  return {
    operationId: route.operationId,
    summary: route.summary,
    ...(route.description !== undefined && { description: route.description }),
    tags: route.tags,
    security: API_SECURITY,
    ...(parameters.length > 0 && { parameters }),
    ...(route.body && {
      requestBody: { required: true, content: json({ schema: jsonSchemaOf(route.body, 'input') }) },
    }),
    responses: {
      '200': success(dataOf(route), 'SUCCESS'),
      ...errorResponses(resultCodesOf(route)),
    },
  };
}

/** The document's paths of the routes, in their order. */
export function pathsOf(routes: readonly DeclaredRoute[]): OpenApiPaths {
  const paths: OpenApiPaths = {};
  for (const route of routes) {
    const item = (paths[route.path] ??= {});
    if (item[route.method]) throw new Error(`${route.method} ${route.path} is declared twice`);
    item[route.method] = operationOf(route);
  }
  return paths;
}

/**
 * The zod schemas with an id the routes use, which become components: what clients send
 * (path ids, queries, bodies) and what they get back.
 */
export function componentSchemasOfRoutes(routes: readonly DeclaredRoute[]): {
  input: z.ZodType[];
  output: z.ZodType[];
} {
  // One schema per id (a component has one definition); schemas without an id stay inline.
  const input = new Map<unknown, z.ZodType>();
  const output = new Map<unknown, z.ZodType>();
  const add = (to: Map<unknown, z.ZodType>, s: z.ZodType) => {
    const id = s.meta()?.id;
    if (typeof id === 'string') to.set(id, s);
  };
  for (const route of routes) {
    for (const param of Object.values(route.params ?? {})) add(input, param.schema);
    const shape = (route.query as z.ZodObject | undefined)?.shape ?? {};
    for (const field of Object.values(shape)) add(input, field as z.ZodType);
    if (route.body) add(input, route.body);
    if (!('component' in route.data)) {
      const { data } = route;
      add(output, data instanceof z.ZodArray ? (data.element as z.ZodType) : data);
    }
  }
  return { input: [...input.values()], output: [...output.values()] };
}
