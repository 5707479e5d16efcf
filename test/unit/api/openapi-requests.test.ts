import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { openApiDocument, type HttpMethod } from '../../../src/api/openapi.ts';
import { componentSchemasOf, idSchemasIn } from '../../../src/api/openapi-zod.ts';
import { isOrganizationId, isWorkspaceId } from '../../../src/tenancy/identifiers.ts';
import { passwordBody } from '../../../src/platform/users.schemas.ts';
import { downloadRequest } from '../../../src/audit/download-jobs.schemas.ts';
import { administratorsChange, retentionBody } from '../../../src/audit/audit-retention.router.ts';
import {
  MAX_LIFETIME_SECONDS,
  tokenLifetimesPatchSchema,
} from '../../../src/platform/realm-admin/token-lifetimes.ts';
import {
  masterUserBody,
  operationBody,
  organizationBody,
  organizationUserBody,
  workspaceBody,
} from '../../../src/platform/provisioning.schemas.ts';

type Json = Record<string, unknown>;

const OTP = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';

/**
 * Every JSON body a route parses, with the schema the route validates it with (see the
 * routers) and one body that schema accepts. Written here, apart from the document, so the
 * test does not take the document's word for which schema a route uses.
 */
const VALIDATED_BODIES: Record<string, { schema: z.ZodType; valid: Json }> = {
  ...Object.fromEntries(
    [
      '/api/{organization_id}/platform',
      '/api/platform',
      '/api/platform/organizations/{organization_id}',
    ].map((base) => [
      `post ${base}/auditlog/download`,
      {
        schema: downloadRequest,
        valid: { ts_from: '2026-11-01 00:00:00', ts_to: '2026-11-30T23:59:59Z' },
      },
    ]),
  ),
  'post /api/platform/organizations': {
    schema: organizationBody,
    valid: { id: 'org-1', name: 'Org' },
  },
  'post /api/platform/organizations/{organization_id}/workspaces': {
    schema: workspaceBody,
    valid: { id: 'ws-1', name: 'Ws', description: 'd', environments: ['prod'] },
  },
  'post /api/platform/users': {
    schema: masterUserBody,
    valid: { username: 'admin-1', password: 'pw', otp_secret: OTP },
  },
  'post /api/platform/organizations/{organization_id}/users': {
    schema: organizationUserBody,
    valid: { username: 'user-1', password: 'pw', otp_secret: OTP, workspaces: ['ws-1'] },
  },
  'post /api/platform/organizations/{organization_id}/workspaces/{workspace_id}/operations': {
    schema: operationBody,
    valid: {
      operation_name: 'op',
      scheduled_date_for_execution: '2026-01-02T03:04:05+09:00',
      environment: 'prod',
      remarks: 'r',
    },
  },
  ...Object.fromEntries(
    ['/api/platform', '/api/{organization_id}/platform'].map((base) => [
      `put ${base}/audit-log/retention`,
      { schema: retentionBody, valid: { days: 400 } },
    ]),
  ),
  'put /api/platform/organizations/{organization_id}/audit-log/retention': {
    schema: administratorsChange,
    valid: { days: 400, from: 1 },
  },
  'put /api/platform/users/{username}/password': {
    schema: passwordBody,
    valid: { password: 'pw' },
  },
  'put /api/platform/organizations/{organization_id}/users/{username}/password': {
    schema: passwordBody,
    valid: { password: 'pw' },
  },
  'patch /api/platform/token-lifetimes': {
    schema: tokenLifetimesPatchSchema,
    valid: {
      access_token_lifespan: 60,
      client_session_idle_timeout: 60,
      client_session_max_lifespan: 60,
      offline_session_idle_timeout: 60,
      offline_session_max_lifespan: 60,
      offline_session_max_lifespan_enabled: true,
      dpop_bound_access_tokens: true,
    },
  },
  'patch /api/platform/organizations/{organization_id}/token-lifetimes': {
    schema: tokenLifetimesPatchSchema,
    valid: { access_token_lifespan: 60 },
  },
};

/** Replaces every `$ref` by what it points at, so schemas compare whatever their names. */
function inline(value: unknown, lookup: (ref: string) => unknown): unknown {
  if (Array.isArray(value)) return value.map((item) => inline(item, lookup));
  if (typeof value !== 'object' || value === null) return value;
  const { $ref, ...rest } = value as Json;
  if (typeof $ref === 'string') return inline({ ...(lookup($ref) as Json), ...rest }, lookup);
  return Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, inline(v, lookup)]));
}

const components = openApiDocument.components.schemas as Record<string, unknown>;
const fromDocument = (ref: string) => components[ref.replace('#/components/schemas/', '')];

/** The request body schema the document shows for an operation, references resolved. */
function documentedBody(key: string): Json {
  const [method, path] = key.split(' ') as [HttpMethod, string];
  const body = openApiDocument.paths[path]?.[method]?.requestBody as Json;
  const content = body.content as Record<string, { schema: unknown }>;
  return inline(content['application/json']!.schema, fromDocument) as Json;
}

/** What zod alone makes of the schema, references resolved: the server's own view. */
function zodView(schema: z.ZodType): Json {
  const root = { ...z.toJSONSchema(schema, { io: 'input', target: 'draft-2020-12' }) } as Json;
  const defs = (root.$defs ?? {}) as Json;
  delete root.$defs;
  delete root.$schema;
  return inline(root, (ref) => defs[ref.replace('#/$defs/', '')]) as Json;
}

const accepts = (schema: z.ZodType, body: unknown) => schema.safeParse(body).success;
const propertiesOf = (schema: Json) => schema.properties as Record<string, Json>;

describe('the OpenAPI request bodies are the schemas the server validates with', () => {
  const documented = Object.entries(openApiDocument.paths).flatMap(([path, item]) =>
    Object.entries(item).flatMap(([method, operation]) =>
      'application/json' in
      ((operation.requestBody as { content?: Json } | undefined)?.content ?? {})
        ? [`${method} ${path}`]
        : [],
    ),
  );

  it('documents a JSON body for exactly the routes that parse one', () => {
    expect(documented.sort()).toEqual(Object.keys(VALIDATED_BODIES).sort());
  });

  it.each(Object.keys(VALIDATED_BODIES))('%s: document = z.toJSONSchema', (key) => {
    expect(documentedBody(key)).toEqual(zodView(VALIDATED_BODIES[key]!.schema));
  });

  it.each(Object.entries(VALIDATED_BODIES))(
    '%s: the sample body is valid',
    (_key, { schema, valid }) => {
      expect(schema.parse(valid)).toEqual(valid);
    },
  );

  it.each(Object.keys(VALIDATED_BODIES))(
    '%s: required, nullable and unknown fields as documented',
    (key) => {
      const { schema, valid } = VALIDATED_BODIES[key]!;
      const body = documentedBody(key);
      const required = new Set(body.required as string[] | undefined);
      expect(body.additionalProperties).toBe(false);
      expect(accepts(schema, { ...valid, not_a_field: 1 })).toBe(false);
      for (const [field, property] of Object.entries(propertiesOf(body))) {
        const without = { ...valid };
        delete without[field];
        expect(accepts(schema, without), `without ${field}`).toBe(!required.has(field));
        const nullable = JSON.stringify(property.anyOf ?? []).includes('{"type":"null"}');
        expect(accepts(schema, { ...valid, [field]: null }), `${field}: null`).toBe(nullable);
      }
    },
  );

  it.each(Object.keys(VALIDATED_BODIES))('%s: length and item limits as documented', (key) => {
    const { schema, valid } = VALIDATED_BODIES[key]!;
    for (const [field, property] of Object.entries(propertiesOf(documentedBody(key)))) {
      const string = (property.anyOf as Json[] | undefined)?.[0] ?? property;
      if (string.type === 'string' && typeof string.maxLength === 'number' && !string.allOf) {
        const max = string.maxLength;
        const min = (string.minLength as number | undefined) ?? 0;
        const at = (length: number) => accepts(schema, { ...valid, [field]: 'a'.repeat(length) });
        expect([at(max), at(max + 1)], `${field} up to ${max}`).toEqual([true, false]);
        expect(at(min), `${field} from ${min}`).toBe(true);
        if (min > 0) expect(at(min - 1), `${field} from ${min}`).toBe(false);
      }
      if (property.type === 'array' && typeof property.maxItems === 'number') {
        const item = (valid[field] as unknown[])[0];
        const items = (count: number) => Array.from({ length: count }, () => item);
        const at = (count: number) => accepts(schema, { ...valid, [field]: items(count) });
        expect([at(property.maxItems), at(property.maxItems + 1)], field).toEqual([true, false]);
      }
    }
  });

  it('documents the lifetimes the server accepts: 1 to 315,360,000 s, whole seconds', () => {
    const key = 'patch /api/platform/token-lifetimes';
    const lifetimes = Object.entries(propertiesOf(documentedBody(key))).filter(
      ([, property]) => property.type === 'integer',
    );
    expect(lifetimes).toHaveLength(5);
    const at = (field: string, value: unknown) =>
      accepts(tokenLifetimesPatchSchema, { [field]: value });
    for (const [field, property] of lifetimes) {
      expect([property.minimum, property.maximum], field).toEqual([1, MAX_LIFETIME_SECONDS]);
      expect(MAX_LIFETIME_SECONDS).toBe(315_360_000);
      expect(at(field, 1) && at(field, MAX_LIFETIME_SECONDS), field).toBe(true);
      for (const refused of [0, MAX_LIFETIME_SECONDS + 1, 2_147_483_647, 1.5, '60']) {
        expect(at(field, refused), `${field}: ${refused}`).toBe(false);
      }
    }
    expect(accepts(tokenLifetimesPatchSchema, {})).toBe(true);
  });

  it('documents the patterns the server checks strings with', () => {
    const samples = [
      'plain',
      'two\nlines',
      'tab\there',
      'cr\rlf',
      'nul\u0000',
      'esc\u001b',
      'del\u007f',
      'c1\u0085',
      'nbsp\u00a0',
      'lone\ud800',
      'low\udc00',
      'emoji \u{1f600}',
      'é',
    ];
    const key = 'post /api/platform/organizations/{organization_id}/workspaces';
    const { schema, valid } = VALIDATED_BODIES[key]!;
    for (const field of ['name', 'description']) {
      const pattern = new RegExp(propertiesOf(documentedBody(key))[field]!.pattern as string, 'u');
      for (const value of samples) {
        expect(
          accepts(schema, { ...valid, [field]: value }),
          `${field}: ${JSON.stringify(value)}`,
        ).toBe(pattern.test(value));
      }
    }
  });

  it('documents the OTP secret rule the server applies', () => {
    const otp = propertiesOf(documentedBody('post /api/platform/users')).otp_secret!;
    const patterns = (otp.allOf as Json[]).map((p) => new RegExp(p.pattern as string, 'u'));
    const documentedOk = (value: string) =>
      value.length <= (otp.maxLength as number) && patterns.every((p) => p.test(value));
    const samples = [
      OTP,
      OTP.toLowerCase(),
      'jbsw y3dp ehpk 3pxp jbsw y3dp ehpk 3pxp',
      `${OTP}====`,
      `${OTP}= =`,
      'A'.repeat(25),
      'A'.repeat(26),
      'A'.repeat(256),
      'A'.repeat(257),
      `${'A'.repeat(256)}${' '.repeat(256)}`,
      `${OTP}1`,
      `${OTP.slice(0, 10)}=${OTP.slice(10)}`,
      `${OTP}\n`,
      `\u017f${OTP}`,
    ];
    for (const value of samples) {
      expect(
        accepts(masterUserBody, { username: 'u', password: 'p', otp_secret: value }),
        value,
      ).toBe(documentedOk(value));
    }
  });

  it('documents the id rules path parameters and bodies obey', () => {
    const pattern = (name: string) => new RegExp((components[name] as Json).pattern as string);
    const samples = ['a', 'demo-org', 'x_1', 'A', '1a', 'a'.repeat(36), 'a'.repeat(37), 'Ws-1'];
    const reserved = ['master', 'platform', 'admin', 'auth', 'api', 'masters', 'api-1'];
    for (const id of [...samples, ...reserved, '-a', 'a.b', '']) {
      expect(pattern('OrganizationId').test(id), id).toBe(isOrganizationId(id));
      expect(pattern('WorkspaceId').test(id), id).toBe(isWorkspaceId(id));
    }
  });
});

describe('componentSchemasOf', () => {
  it('refuses a rule JSON Schema cannot carry', () => {
    const refined = z
      .strictObject({ a: z.string().refine((v) => v !== 'x') })
      .meta({ id: 'Refined' });
    expect(() => componentSchemasOf([refined], 'input')).toThrow(/refinement/);
  });

  it('refuses a shared schema that is not listed', () => {
    const shared = z.string().meta({ id: 'SharedId' });
    const body = z.strictObject({ id: shared }).meta({ id: 'Body' });
    expect(() => componentSchemasOf([body], 'input')).toThrow(/not listed/);
    expect(Object.keys(componentSchemasOf([body, shared], 'input')).sort()).toEqual([
      'Body',
      'SharedId',
    ]);
  });
});

describe('idSchemasIn', () => {
  it('finds the schemas with an id inside objects, lists, unions, optional and nullable fields', () => {
    const a = z.string().meta({ id: 'A' });
    const b = z.union([z.literal('x'), a]).meta({ id: 'B' });
    const c = z.number().meta({ id: 'C' });
    const d = z.boolean().meta({ id: 'D' });
    const answer = z
      .strictObject({
        b,
        list: z.array(c).optional(),
        nested: z.strictObject({ d: d.nullable() }),
      })
      .meta({ id: 'Answer' });
    const found = idSchemasIn([z.array(answer), a]).map((schema) => schema.meta()?.id);
    expect(found.sort()).toEqual(['A', 'Answer', 'B', 'C', 'D']);
  });

  it('refuses two different schemas with one id', () => {
    const first = z.string().meta({ id: 'Twice' });
    const second = z.number().meta({ id: 'Twice' });
    expect(() => idSchemasIn([z.strictObject({ first, second })])).toThrow(/Twice/);
  });
});
