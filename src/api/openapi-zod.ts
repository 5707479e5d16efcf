import { z } from 'zod';

/** Any JSON value; the document is data, served as is. */
export type JsonValue =
  string | number | boolean | null | readonly JsonValue[] | { readonly [key: string]: JsonValue };

export type JsonSchema = { readonly [key: string]: JsonValue };

/** Where the document keeps its component schemas; zod's `$ref`s point there. */
const componentRef = (id: string) => `#/components/schemas/${id}`;

/** The component name a schema carries in `.meta({ id })`. */
export function componentIdOf(schema: z.ZodType): string {
  const id = schema.meta()?.id;
  if (typeof id !== 'string') throw new Error('a documented schema needs .meta({ id })');
  return id;
}

/**
 * A zod rule JSON Schema cannot carry (`.refine`, `.superRefine`, `.check`) would vanish from
 * the document while the server still enforces it: the two would disagree. Refuse it here, so
 * such a rule is written as a pattern, a length or a bound instead.
 */
function refuseRefinements(ctx: { zodSchema: z.core.$ZodTypes; path: (string | number)[] }) {
  const checks = ctx.zodSchema._zod.def.checks ?? [];
  if (checks.some((check) => check._zod.def.check === 'custom')) {
    throw new Error(
      `#/${ctx.path.join('/')}: a refinement has no JSON Schema form; use a pattern or a bound`,
    );
  }
}

/** How zod converts, for components and inline schemas alike. */
const conversion = (io: 'input' | 'output') =>
  ({
    target: 'draft-2020-12',
    io,
    unrepresentable: 'throw',
    override: refuseRefinements,
    uri: componentRef,
  }) as const;

/**
 * The schema of a parameter or an answer: a `$ref` to its component when it has an id (see
 * componentSchemasOf), else converted in place.
 */
export function jsonSchemaOf(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const id = schema.meta()?.id;
  if (typeof id === 'string') return { $ref: componentRef(id) };
  // A list of components (zod would copy the component into the list's own `$defs`).
  if (schema instanceof z.ZodArray)
    return { type: 'array', items: jsonSchemaOf(schema.element as z.ZodType, io) };
  const converted: Record<string, unknown> = { ...z.toJSONSchema(schema, conversion(io)) };
  delete converted.$schema;
  return converted as JsonSchema;
}

/** The schemas `schema` is made of: its fields, items, options, inner and piped schemas. */
function partsOf(schema: z.ZodType): z.ZodType[] {
  const parts: z.ZodType[] = [];
  const collect = (value: unknown, depth: number) => {
    if (value instanceof z.ZodType) parts.push(value);
    else if (depth > 0 && Array.isArray(value)) for (const v of value) collect(v, depth - 1);
    else if (depth > 0 && typeof value === 'object' && value !== null) {
      for (const v of Object.values(value)) collect(v, depth - 1);
    }
  };
  // One level down: an object's `shape`, a union's `options` (the schemas themselves or lists).
  for (const value of Object.values(schema._zod.def)) collect(value, 1);
  return parts;
}

/**
 * Every schema with an id (`.meta({ id })`) among `schemas` and the schemas they are made of,
 * once each: the components a document of them needs. Two different schemas with one id would
 * be two definitions of one component: refused.
 */
export function idSchemasIn(schemas: readonly z.ZodType[]): z.ZodType[] {
  const byId = new Map<string, z.ZodType>();
  const seen = new Set<z.ZodType>();
  const visit = (schema: z.ZodType) => {
    if (seen.has(schema)) return;
    seen.add(schema);
    const id = schema.meta()?.id;
    if (typeof id === 'string') {
      const known = byId.get(id);
      if (known && known !== schema) throw new Error(`two schemas have the id ${id}`);
      byId.set(id, schema);
    }
    for (const part of partsOf(schema)) visit(part);
  };
  for (const schema of schemas) visit(schema);
  return [...byId.values()];
}

/**
 * The JSON Schemas (2020-12, the dialect of OpenAPI 3.1) of `schemas`, one component per
 * `.meta({ id })`, converted by zod itself from the schemas the server uses. `io: 'input'` for
 * request bodies (what a client may send), `'output'` for answers. Every schema with an id
 * that another one uses must be in `schemas` too, so it becomes a component of its own.
 */
export function componentSchemasOf(
  schemas: z.ZodType[],
  io: 'input' | 'output',
): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  const ids = new Set<string>();
  for (const schema of schemas) {
    const id = componentIdOf(schema);
    registry.add(schema, { id });
    ids.add(id);
  }
  const converted = z.toJSONSchema(registry, conversion(io)).schemas;
  const components: Record<string, JsonSchema> = {};
  for (const [id, generated] of Object.entries(converted)) {
    // zod gathers a used schema that is not listed under `__shared`.
    if (!ids.has(id)) throw new Error(`${id}: a schema with an id is used but not listed`);
    // The dialect and the id are the document's (OpenAPI 3.1, the component's place).
    const schema: Record<string, unknown> = { ...generated };
    delete schema.$schema;
    delete schema.$id;
    components[id] = schema as JsonSchema;
  }
  return components;
}
