import { z } from 'zod';
import { admissionRefusalsOf } from '../auth/admission.ts';
import type { ErrorCode } from '../envelope/errors.ts';
import { BODY_READER_ERRORS, readsBody, type AnyRoute } from '../http/route-table.ts';
import {
  errorResponses,
  json,
  success,
  type OpenApiOperation,
  type OpenApiPaths,
} from './openapi-answers.ts';
import { idSchemasIn, jsonSchemaOf, type JsonValue } from './openapi-zod.ts';

/** A route of any table: the document reads its declaration, never calls its handler. */
export type DeclaredRoute = AnyRoute<never>;

/** Either scheme works on every platform and automation API (spec 4, 5). */
export const API_SECURITY: Record<string, string[]>[] = [
  { basicAuth: [] },
  { bearerAuth: [] },
  { dpopAuth: [] },
];

/**
 * Every result code a route can answer, each from where it is decided: the admission's steps
 * (auth/admission.ts), the declared ones, those of its query, and those of reading its body
 * where the API reads one (route-table.ts).
 */
export function resultCodesOf(route: DeclaredRoute): ErrorCode[] {
  const codes = [...admissionRefusalsOf(route), ...(route.errors ?? [])];
  if (route.query) codes.push(route.queryRefusal ?? 'badRequestBody');
  if (readsBody(route)) codes.push(...BODY_READER_ERRORS);
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
      '200': route.streams
        ? {
            description: 'SUCCESS, streamed',
            content: Object.fromEntries(
              Object.entries(route.streams).map(([type, description]) => [
                type,
                { schema: { type: 'string', description } },
              ]),
            ),
          }
        : success(jsonSchemaOf(route.data, 'output'), 'SUCCESS'),
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
 * The zod schemas with an id the routes use, those they contain included, which become
 * components: what clients send (path ids, queries, bodies) and what they get back.
 */
export function componentSchemasOfRoutes(routes: readonly DeclaredRoute[]): {
  input: z.ZodType[];
  output: z.ZodType[];
} {
  const input: z.ZodType[] = [];
  const output: z.ZodType[] = [];
  for (const route of routes) {
    input.push(...Object.values(route.params ?? {}).map((param) => param.schema));
    if (route.query) input.push(route.query);
    if (route.body) input.push(route.body);
    if (!route.streams) output.push(route.data);
  }
  return { input: idSchemasIn(input), output: idSchemasIn(output) };
}
