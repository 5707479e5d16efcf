import { AUDIT_KEYS_PATH } from '../../../src/audit/audit-keys.router.ts';
import { RESOURCE_METADATA_ROUTES } from '../../../src/auth/resource-metadata.ts';
import { describe, expect, it } from 'vitest';
import { API_ROUTES, API_TABLES } from '../../../src/api/api-routes.ts';
import {
  openApiDocument,
  type HttpMethod,
  type OpenApiOperation,
} from '../../../src/api/openapi.ts';
import { readJobFields } from '../../../src/auth-proxy/job-credentials.ts';
import { resultCodesOf } from '../../../src/api/openapi-routes.ts';
import { errorCodes } from '../../../src/envelope/errors.ts';
import {
  isOrganizationId,
  isWorkspaceId,
  ORGANIZATION_ID,
  WORKSPACE_ID,
} from '../../../src/tenancy/identifiers.ts';

const METHODS: HttpMethod[] = ['get', 'post', 'put', 'patch', 'delete'];

/** Documented operations no route table mounts: probes, the token endpoint, this document. */
const SERVED_ELSEWHERE = [
  'GET /healthz',
  'GET /readyz',
  'GET /api/openapi.json',
  'POST /auth/realms/{realm}/protocol/openid-connect/token',
  ...RESOURCE_METADATA_ROUTES.map((route) => `GET ${route.path}`),
  `GET ${AUDIT_KEYS_PATH}`,
];

function operations(): { path: string; method: HttpMethod; operation: OpenApiOperation }[] {
  return Object.entries(openApiDocument.paths).flatMap(([path, item]) =>
    METHODS.flatMap((method) => {
      const operation = item[method];
      return operation ? [{ path, method, operation }] : [];
    }),
  );
}

/** Every `$ref` anywhere in `value`, with where it was found. */
function collectRefs(value: unknown, at = '#'): { ref: string; at: string }[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => collectRefs(v, `${at}/${i}`));
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([key, v]) =>
    key === '$ref' ? [{ ref: String(v), at }] : collectRefs(v, `${at}/${key}`),
  );
}

function resolvePointer(ref: string): unknown {
  const segments = ref.slice(2).split('/');
  let node: unknown = openApiDocument;
  for (const raw of segments) {
    const key = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (typeof node !== 'object' || node === null || !(key in node)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

function resolve(value: unknown): unknown {
  const ref = (value as { $ref?: string }).$ref;
  return ref === undefined ? value : resolve(resolvePointer(ref));
}

describe('openApiDocument', () => {
  it('is OpenAPI 3.1 with the agreed info and server', () => {
    expect(openApiDocument.openapi).toMatch(/^3\.1\.\d+$/);
    expect(openApiDocument.info.version).toBe('0.1.0');
    expect(openApiDocument.info.license.identifier).toBe('Apache-2.0');
    expect(openApiDocument.servers).toEqual([{ url: '/' }]);
  });

  it('is plain JSON', () => {
    expect(JSON.parse(JSON.stringify(openApiDocument))).toEqual(openApiDocument);
  });

  it('gives every path at least one operation, each with responses', () => {
    for (const [path, item] of Object.entries(openApiDocument.paths)) {
      const present = METHODS.filter((method) => item[method]);
      expect(present.length, path).toBeGreaterThan(0);
      for (const method of present) {
        expect(Object.keys(item[method]!.responses).length, `${method} ${path}`).toBeGreaterThan(0);
      }
    }
  });

  it('documents exactly the routes served from the route tables, both ways', () => {
    const documented = operations().map(({ method, path }) => `${method.toUpperCase()} ${path}`);
    const mounted = Object.values(API_TABLES).flatMap((routes) =>
      routes.map((route) => `${route.method.toUpperCase()} ${route.path}`),
    );
    expect(new Set(mounted).size).toBe(mounted.length);
    expect(documented.sort()).toEqual([...mounted, ...SERVED_ELSEWHERE].sort());
  });

  it('declares only result codes of the closed error table', () => {
    for (const route of API_ROUTES) {
      for (const code of resultCodesOf(route)) {
        expect(errorCodes, `${route.method} ${route.path}`).toHaveProperty(code);
      }
    }
  });

  it('resolves every $ref inside the document', () => {
    const refs = collectRefs(openApiDocument);
    expect(refs.length).toBeGreaterThan(20);
    for (const { ref, at } of refs) {
      expect(ref, at).toMatch(/^#\//);
      expect(resolvePointer(ref), `${ref} at ${at}`).toBeDefined();
    }
  });

  it('has unique operationIds', () => {
    const ids = operations().map(({ operation }) => operation.operationId);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('secures every /api/ operation but the document itself, with declared schemes', () => {
    const schemes = Object.keys(openApiDocument.components.securitySchemes);
    expect(schemes.sort()).toEqual(['basicAuth', 'bearerAuth', 'dpopAuth']);
    for (const { path, method, operation } of operations()) {
      const label = `${method} ${path}`;
      if (!path.startsWith('/api/') || path === '/api/openapi.json') {
        expect(operation.security, label).toEqual([]);
        continue;
      }
      expect(operation.security, label).toEqual([
        { basicAuth: [] },
        { bearerAuth: [] },
        { dpopAuth: [] },
      ]);
    }
    expect(openApiDocument.components.securitySchemes.bearerAuth).toMatchObject({
      type: 'http',
      scheme: 'bearer',
      bearerFormat: 'JWT',
    });
  });

  it('declares every path template parameter, with the id patterns', () => {
    for (const { path, method, operation } of operations()) {
      const declared = (operation.parameters ?? [])
        .map((p) => resolve(p) as { name: string; in: string; required: boolean })
        .filter((p) => p.in === 'path' && p.required);
      const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      expect(declared.map((p) => p.name).sort(), `${method} ${path}`).toEqual(templated.sort());
    }
    const { schemas } = openApiDocument.components;
    expect(schemas.OrganizationId?.pattern).toBe(ORGANIZATION_ID.source);
    expect(schemas.WorkspaceId?.pattern).toBe(WORKSPACE_ID.source);
  });

  it('keeps its id patterns in step with the gateway’s own checks', () => {
    const patternOf = (name: string) => {
      const pattern = openApiDocument.components.schemas[name]?.pattern;
      if (typeof pattern !== 'string') throw new Error(`${name} has no pattern`);
      return new RegExp(pattern);
    };
    const organization = patternOf('OrganizationId');
    const workspace = patternOf('WorkspaceId');
    const samples = [
      'a',
      'demo-org',
      'x_1',
      'A',
      '1a',
      'a'.repeat(36),
      'a'.repeat(37),
      'Ws-1',
      '-a',
      'a.b',
      '',
      'master',
      'platform',
      'api',
      'masters',
    ];
    for (const id of samples) {
      expect(organization.test(id), id).toBe(isOrganizationId(id));
      expect(workspace.test(id), id).toBe(isWorkspaceId(id));
    }
  });

  it('documents error answers in the error envelope with their result codes', () => {
    const created =
      openApiDocument.paths['/api/platform/organizations/{organization_id}/workspaces']!.post!;
    expect(Object.keys(created.responses).sort()).toEqual([
      '200',
      '400',
      '401',
      '403',
      '404',
      '413',
      '429',
      '500',
      '502',
      '503',
      '504',
    ]);
    expect(JSON.stringify(created.responses['404'])).toContain('404-00001');
    expect(JSON.stringify(created.responses['413'])).toContain('413-00000');
    expect(JSON.stringify(created.responses['504'])).toContain('504-11001');
    expect(JSON.stringify(created.responses['429'])).toContain('429-00001');
    expect(JSON.stringify(created.responses['429'])).toContain('Retry-After');
    expect(JSON.stringify(created.responses['400'])).toContain('400-00002');
    const listed =
      openApiDocument.paths[
        '/api/{organization_id}/workspaces/{workspace_id}/ita/menu/operation_list/filter/'
      ]!.get!;
    expect(JSON.stringify(listed.responses['403'])).toContain('403-00001');
    expect(JSON.stringify(listed.responses['404'])).toContain('404-00002');
    expect(JSON.stringify(listed.responses['503'])).toContain('503-11001');
    // The operation list reads no body, as the forwarded route it stands in for.
    expect(listed.responses['413']).toBeUndefined();
  });

  it("documents the admission's reach refusals where it can give them", () => {
    const created =
      openApiDocument.paths['/api/platform/organizations/{organization_id}/workspaces']!.post!;
    const listed =
      openApiDocument.paths[
        '/api/{organization_id}/workspaces/{workspace_id}/ita/menu/operation_list/filter/'
      ]!.get!;
    const organizations = openApiDocument.paths['/api/platform/organizations']!.get!;
    // A read-only token's write, on any realm's path.
    expect(JSON.stringify(created.responses['403'])).toContain('403-30002');
    expect(JSON.stringify(created.responses['403'])).not.toContain('403-30001');
    // A workspace outside the token's; never on a read.
    expect(JSON.stringify(listed.responses['403'])).toContain('403-30001');
    expect(JSON.stringify(listed.responses['403'])).not.toContain('403-30002');
    expect(organizations.responses['403']).toBeUndefined();
  });
  it("gives the token endpoint's refusals examples, the gateway's worded by its code", () => {
    const { responses } =
      openApiDocument.paths['/auth/realms/{realm}/protocol/openid-connect/token']!.post!;
    const examplesAt = (status: string) =>
      Object.values(
        (
          responses[status] as {
            content: Record<string, { examples?: Record<string, { value: unknown }> }>;
          }
        ).content['application/json']!.examples ?? {},
      ).map((example) => example.value as { error: string; error_description: string });
    const refused = examplesAt('400');
    expect(new Set(refused.map((example) => example.error))).toEqual(
      new Set(['invalid_request', 'invalid_grant', 'unsupported_grant_type', 'invalid_dpop_proof']),
    );
    // A DPoP proof's weak key, refused as the token endpoint's step words it.
    expect(refused).toContainEqual({
      error: 'invalid_dpop_proof',
      error_description: "The DPoP proof's RSA key has 1024 bits; at least 2048 bits are needed.",
    });
    // A job credential's field, refused as the token endpoint's own reading words it.
    const read = readJobFields(
      new URLSearchParams({ grant_type: 'password', realmgate_expires_in: '30' }),
      'acme',
    );
    expect(read).toHaveProperty('invalid');
    expect(refused).toContainEqual({
      error: 'invalid_request',
      error_description: (read as { invalid: string }).invalid,
    });
    expect(refused).toContainEqual({
      error: 'invalid_request',
      error_description: 'Malformed form body.',
    });
    expect(examplesAt('401')).toContainEqual({
      error: 'invalid_grant',
      error_description: 'Invalid user credentials',
    });
  });
});
