import type { z } from 'zod';
import { errorCodes, type ErrorCode } from '../envelope/errors.ts';
import { tokenLifetimesPatchSchema, tokenLifetimesSchema } from '../keycloak/token-lifetimes.ts';
import {
  masterUserBody,
  operationBody,
  organizationBody,
  organizationId,
  organizationUserBody,
  workspaceBody,
  workspaceId,
} from '../platform/provisioning.schemas.ts';
import { passwordBody } from '../platform/users.schemas.ts';
import { arrayOf, EXAMPLE_TS, object, schema, schemas } from './openapi-schemas.ts';
import {
  componentIdOf,
  componentSchemasOf,
  type JsonSchema,
  type JsonValue,
} from './openapi-zod.ts';

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** The parts of an OpenAPI operation the tests and the document rely on. */
export interface OpenApiOperation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /** `[]`: no authentication. There is no top-level `security`: each operation says. */
  security: Record<string, string[]>[];
  parameters?: JsonValue[];
  requestBody?: JsonValue;
  responses: Record<string, JsonValue>;
}

export interface OpenApiDocument {
  openapi: string;
  info: {
    title: string;
    version: string;
    description: string;
    license: { name: string; identifier: string };
  };
  servers: { url: string }[];
  tags: { name: string; description: string }[];
  paths: Record<string, Partial<Record<HttpMethod, OpenApiOperation>>>;
  components: Record<'securitySchemes' | 'schemas' | 'parameters', Record<string, JsonSchema>>;
}

/**
 * The schemas the server validates requests with (bodies; ids, which path parameters also
 * obey) and the one answer built from a zod schema. The document shows what zod makes of
 * them, so it cannot disagree with the server.
 */
const REQUEST_SCHEMAS: z.ZodType[] = [
  organizationId,
  workspaceId,
  organizationBody,
  workspaceBody,
  masterUserBody,
  organizationUserBody,
  operationBody,
  tokenLifetimesPatchSchema,
  passwordBody,
];
const RESPONSE_SCHEMAS: z.ZodType[] = [tokenLifetimesSchema];

const parameter = (name: string) => ({ $ref: `#/components/parameters/${name}` });

/** Either scheme works on every platform and automation API (spec 4, 5). */
const API_SECURITY: Record<string, string[]>[] = [{ basicAuth: [] }, { bearerAuth: [] }];
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

function json(body: JsonValue): JsonValue {
  return { 'application/json': body };
}

function success(data: JsonValue, description: string): JsonValue {
  const envelope = { allOf: [schema('Envelope'), { type: 'object', properties: { data } }] };
  return { description, content: json({ schema: envelope }) };
}

/** Groups error codes by status; each status documents every result code it can carry. */
function errorResponses(codes: ErrorCode[]): Record<string, JsonValue> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const { status } = errorCodes[code];
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<string, JsonValue> = {};
  for (const [status, group] of byStatus) {
    const examples = Object.fromEntries(
      group.map((code) => {
        const { result, message } = errorCodes[code];
        return [code, { value: { data: null, message, result, ts: EXAMPLE_TS } }];
      }),
    );
    responses[String(status)] = {
      description: group
        .map((code) => `${errorCodes[code].result} ${errorCodes[code].message}`)
        .join(' / '),
      ...(status === 401 && { headers: { 'WWW-Authenticate': { schema: { type: 'string' } } } }),
      ...((status === 503 || status === 429) && {
        headers: { 'Retry-After': { schema: { type: 'integer' } } },
      }),
      content: json({ schema: schema('ErrorEnvelope'), examples }),
    };
  }
  return responses;
}

interface ApiOperationSpec {
  operationId: string;
  summary: string;
  tags: string[];
  description?: string;
  parameters?: string[];
  /** The schema the route validates its JSON body with. */
  body?: z.ZodType;
  data: JsonValue;
  errors?: ErrorCode[];
}

/** An authenticated `/api/` operation answering in the envelope. */
function apiOperation(spec: ApiOperationSpec): OpenApiOperation {
  const errors: ErrorCode[] = [...AUTH_ERRORS, ...(spec.errors ?? [])];
  if (spec.body) errors.push('badRequestBody');
  return {
    operationId: spec.operationId,
    summary: spec.summary,
    ...(spec.description !== undefined && { description: spec.description }),
    tags: spec.tags,
    security: API_SECURITY,
    ...(spec.parameters && { parameters: spec.parameters.map(parameter) }),
    ...(spec.body && {
      requestBody: {
        required: true,
        content: json({ schema: schema(componentIdOf(spec.body)) }),
      },
    }),
    responses: { '200': success(spec.data, 'SUCCESS'), ...errorResponses(errors) },
  };
}

const ORG = ['OrganizationId'];
const ORG_WS = ['OrganizationId', 'WorkspaceId'];
const ORG_ERRORS: ErrorCode[] = ['organizationNotFound'];
/** An organization's own calls (`/api/<org>/...`) are also refused while it is disabled. */
const ORG_API_ERRORS: ErrorCode[] = ['organizationNotFound', 'organizationDisabled'];
const WS_ERRORS: ErrorCode[] = ['organizationNotFound', 'workspaceNotFound'];
const USER_EXISTS_DESCRIPTION =
  'Creates a new user only: a username that exists in the realm (in any letter case) answers ' +
  '409 `409-00001` and changes nothing, so no password, role or OTP of an existing account ' +
  'can be replaced through this call.';
const LIFETIMES_DESCRIPTION =
  'Access token lifespan and client session limits of the API client, offline (refresh token) ' +
  'session limits of the realm, in seconds (spec 5.3).';

function lifetimesPath(
  realm: 'master' | 'organization',
): Partial<Record<HttpMethod, OpenApiOperation>> {
  const suffix = realm === 'master' ? 'Master' : 'Organization';
  const of = realm === 'master' ? 'realm master' : "an organization's realm";
  const common = {
    tags: ['tokens'],
    description: LIFETIMES_DESCRIPTION,
    data: schema('TokenLifetimes'),
  };
  const scope = realm === 'master' ? {} : { parameters: ORG, errors: ORG_ERRORS };
  return {
    get: apiOperation({
      operationId: `getTokenLifetimes${suffix}`,
      summary: `Token lifetimes of ${of}`,
      ...common,
      ...scope,
    }),
    patch: apiOperation({
      operationId: `setTokenLifetimes${suffix}`,
      summary: `Change token lifetimes of ${of}`,
      body: tokenLifetimesPatchSchema,
      ...common,
      ...scope,
    }),
  };
}

const TOKEN_ERRORS: ErrorCode[] = [
  'gatewayServiceToken',
  'offlineSessionsUnreadable',
  'realmUnreadable',
];

/** The caller's refresh tokens (spec 4.5, 4.6), for administrators or organization users. */
function refreshTokensPaths(realm: 'master' | 'organization') {
  const suffix = realm === 'master' ? 'Master' : 'Organization';
  const orgParameters = realm === 'master' ? [] : ORG;
  const orgErrors = realm === 'master' ? [] : ORG_API_ERRORS;
  const common = { tags: ['tokens'], errors: [...orgErrors, ...TOKEN_ERRORS] };
  const all: Partial<Record<HttpMethod, OpenApiOperation>> = {
    get: apiOperation({
      operationId: `listRefreshTokens${suffix}`,
      summary: 'List own refresh tokens',
      parameters: orgParameters,
      data: arrayOf(schema('RefreshToken')),
      ...common,
    }),
    delete: apiOperation({
      operationId: `revokeRefreshTokens${suffix}`,
      summary: 'Revoke all own refresh tokens; their access tokens stop working at once',
      parameters: orgParameters,
      data: { type: 'null' },
      ...common,
      errors: [...common.errors, 'revokeFailed'],
    }),
  };
  const one: Partial<Record<HttpMethod, OpenApiOperation>> = {
    delete: apiOperation({
      operationId: `revokeRefreshToken${suffix}`,
      summary: 'Revoke one own refresh token (beyond the spec); unknown or foreign ids are 404',
      parameters: [...orgParameters, 'RefreshTokenId'],
      data: { type: 'null' },
      ...common,
      errors: [...common.errors, 'refreshTokenNotFound', 'revokeFailed'],
    }),
  };
  return { all, one };
}

const PROTECTED_DESCRIPTION =
  "Refused with 403 `403-00002`, changing nothing, for Keycloak's bootstrap administrator, " +
  "service accounts, users holding Keycloak's administration roles (realm `admin`, " +
  '`create-realm`, `realm-management` or `<realm>-realm` client roles) and, for disable and ' +
  "delete, the caller's own account.";

/** The user lifecycle (users.router.ts), for master users and organization users alike. */
function userLifecyclePaths(): OpenApiDocument['paths'] {
  const paths: OpenApiDocument['paths'] = {};
  for (const realm of ['master', 'organization'] as const) {
    const isMaster = realm === 'master';
    const base = isMaster
      ? '/api/platform/users'
      : '/api/platform/organizations/{organization_id}/users';
    const of = isMaster ? 'Master' : 'Organization';
    const scope = isMaster ? [] : ORG;
    const realmErrors: ErrorCode[] = isMaster ? [] : ORG_ERRORS;
    const one = [...scope, 'Username'];
    const oneErrors: ErrorCode[] = [...realmErrors, 'userNotFound'];
    const change = (verb: string, summary: string, extra: Partial<ApiOperationSpec> = {}) =>
      apiOperation({
        operationId: `${verb}${of}User`,
        summary,
        description: PROTECTED_DESCRIPTION,
        tags: ['users'],
        parameters: one,
        data: schema('UserRecord'),
        errors: [...oneErrors, 'protectedAccount'],
        ...extra,
      });
    paths[base] = {
      get: apiOperation({
        operationId: `list${of}Users`,
        summary: 'List users, by username, one page at a time',
        description:
          '`first` (default 0) and `max` (1 to 1000, default 100) page the list; `search` keeps ' +
          'users whose username, email or name contains it. Other query parameters are 400.',
        tags: ['users'],
        parameters: [...scope, 'First', 'Max', 'Search'],
        data: arrayOf(schema('UserRecord')),
        errors: [...realmErrors, 'badRequestBody'],
      }),
    };
    paths[`${base}/{username}`] = {
      get: apiOperation({
        operationId: `get${of}User`,
        summary: 'One user, by username (letter case ignored, as Keycloak does)',
        tags: ['users'],
        parameters: one,
        data: schema('UserRecord'),
        errors: oneErrors,
      }),
      delete: change(
        'delete',
        "Delete a user: the user's tokens stop at once on every replica, then Keycloak deletes it",
      ),
    };
    paths[`${base}/{username}/disable`] = {
      post: change(
        'disable',
        "Disable a user: the user's tokens stop at once on every replica and its Keycloak " +
          'sessions (online and offline) end',
      ),
    };
    paths[`${base}/{username}/enable`] = { post: change('enable', 'Enable a user') };
    paths[`${base}/{username}/password`] = {
      put: change(
        'setPassword',
        'Set a new permanent password; cached Basic logins with the old one stop at once, ' +
          'sessions and their tokens stay',
        { body: passwordBody },
      ),
    };
  }
  const workspace = (verb: 'grant' | 'revoke', summary: string) =>
    apiOperation({
      operationId: `${verb}WorkspaceRole`,
      summary,
      description: PROTECTED_DESCRIPTION,
      tags: ['users'],
      parameters: [...ORG, 'Username', 'WorkspaceId'],
      data: schema('UserRecord'),
      errors: [...WS_ERRORS, 'userNotFound', 'protectedAccount'],
    });
  paths[
    '/api/platform/organizations/{organization_id}/users/{username}/workspaces/{workspace_id}'
  ] = {
    put: workspace('grant', 'Grant role `<ws>` (idempotent)'),
    delete: workspace(
      'revoke',
      "Remove role `<ws>` (idempotent); the user's tokens issued before stop at once, a " +
        'refreshed token comes without the role',
    ),
  };
  return paths;
}

const keycloakJson = (description: string) => ({
  description,
  content: json({ schema: schema('OAuthError') }),
});

const paths: OpenApiDocument['paths'] = {
  '/healthz': {
    get: {
      operationId: 'getHealth',
      summary: 'The process is up',
      tags: ['health'],
      security: [],
      responses: { '200': success(object({ status: { const: 'up' } }), 'Up') },
    },
  },
  '/readyz': {
    get: {
      operationId: 'getReadiness',
      summary: 'Keycloak, database and cache answered within 2 s',
      tags: ['health'],
      security: [],
      responses: {
        '200': success(
          {
            type: 'object',
            additionalProperties: {
              oneOf: [
                { enum: ['up', 'degraded', 'down'] },
                {
                  ...object({
                    status: { enum: ['up', 'degraded', 'down'] },
                    nodes: {
                      type: 'array',
                      items: object({
                        url: { type: 'string', format: 'uri' },
                        state: { enum: ['up', 'down'] },
                        since: { type: 'string', format: 'date-time' },
                      }),
                    },
                  }),
                  description: 'Keycloak with several nodes, on the admin listener',
                },
              ],
            },
          },
          'Ready; `degraded` is serving, but not as configured (Redis down: in-process cache; ' +
            'a Keycloak node down while another answers)',
        ),
        ...errorResponses(['notReady']),
      },
    },
  },
  '/api/openapi.json': {
    get: {
      operationId: 'getOpenApiDocument',
      summary: 'This document',
      tags: ['health'],
      security: [],
      responses: {
        '200': {
          description: 'OpenAPI 3.1 document',
          content: json({ schema: { type: 'object' } }),
        },
      },
    },
  },
  '/auth/realms/{realm}/protocol/openid-connect/token': {
    post: {
      operationId: 'issueToken',
      summary: 'Password or refresh grant (Keycloak, passed through)',
      description:
        'Credentials travel as form fields, so no security scheme applies. Answers are Keycloak JSON, except the gateway’s own errors, which use the envelope.',
      tags: ['tokens'],
      security: [],
      parameters: [parameter('Realm')],
      requestBody: {
        required: true,
        content: { 'application/x-www-form-urlencoded': { schema: schema('TokenRequest') } },
      },
      responses: {
        '200': { description: 'Tokens', content: json({ schema: schema('TokenResponse') }) },
        '400': keycloakJson('invalid_request, or a malformed form body'),
        '401': keycloakJson(
          'invalid_grant (wrong credentials or one-time password) or invalid_client',
        ),
        ...errorResponses([
          'payloadTooLarge',
          'identityProviderBadGateway',
          'identityProviderUnavailable',
          'identityProviderTimeout',
        ]),
      },
    },
  },
  '/api/platform/organizations': {
    get: apiOperation({
      operationId: 'listOrganizations',
      summary: 'List organizations',
      tags: ['platform'],
      data: arrayOf(schema('Organization')),
    }),
    post: apiOperation({
      operationId: 'createOrganization',
      summary: 'Create an organization (realm, clients, record)',
      tags: ['platform'],
      body: organizationBody,
      data: schema('Organization'),
    }),
  },
  '/api/platform/organizations/{organization_id}': {
    get: apiOperation({
      operationId: 'getOrganization',
      summary: 'One organization (as the list shows it)',
      tags: ['platform'],
      parameters: ORG,
      data: schema('Organization'),
      errors: ORG_ERRORS,
    }),
    delete: apiOperation({
      operationId: 'deleteOrganization',
      summary: 'Delete an organization: its realm, workspaces and operations',
      description:
        'Needs `?confirm=<organization_id>` (else 400 `400-23001`). Deletes the Keycloak realm ' +
        '(users, sessions, clients), then the records; every replica forgets the organization ' +
        'at once. Answers the deleted record. A call that stopped half-way can be repeated.',
      tags: ['platform'],
      parameters: [...ORG, 'Confirm'],
      data: schema('Organization'),
      errors: [...ORG_ERRORS, 'organizationDeleteUnconfirmed'],
    }),
  },
  '/api/platform/organizations/{organization_id}/disable': {
    post: apiOperation({
      operationId: 'disableOrganization',
      summary: 'Disable an organization: its calls answer 403 `403-23001`, its logins fail',
      description:
        'Disables the Keycloak realm, then the record (`enabled: false`); every call under ' +
        '`/api/<organization_id>/` is refused at once on every replica sharing Redis, tokens ' +
        'issued before included. Users, sessions and refresh tokens are kept. Idempotent.',
      tags: ['platform'],
      parameters: ORG,
      data: schema('Organization'),
      errors: ORG_ERRORS,
    }),
  },
  '/api/platform/organizations/{organization_id}/enable': {
    post: apiOperation({
      operationId: 'enableOrganization',
      summary: 'Enable a disabled organization again',
      description: 'Enables the Keycloak realm, then the record. Idempotent.',
      tags: ['platform'],
      parameters: ORG,
      data: schema('Organization'),
      errors: ORG_ERRORS,
    }),
  },
  '/api/platform/organizations/{organization_id}/workspaces/{workspace_id}': {
    delete: apiOperation({
      operationId: 'deleteWorkspace',
      summary: 'Delete a workspace: roles `<ws>`, `_<ws>-admin`, its operations and record',
      tags: ['platform'],
      parameters: ORG_WS,
      data: schema('Workspace'),
      errors: WS_ERRORS,
    }),
  },
  '/api/platform/organizations/{organization_id}/workspaces': {
    get: apiOperation({
      operationId: 'listOrganizationWorkspaces',
      summary: 'Every workspace of an organization',
      tags: ['platform'],
      parameters: ORG,
      data: arrayOf(schema('Workspace')),
      errors: ORG_ERRORS,
    }),
    post: apiOperation({
      operationId: 'createWorkspace',
      summary: 'Create a workspace (record and roles `<ws>`, `_<ws>-admin`)',
      tags: ['platform'],
      parameters: ORG,
      body: workspaceBody,
      data: schema('Workspace'),
      errors: ORG_ERRORS,
    }),
  },
  '/api/platform/users': {
    post: apiOperation({
      operationId: 'createMasterUser',
      summary: 'Create a system administrator (realm master)',
      description: USER_EXISTS_DESCRIPTION,
      tags: ['platform'],
      body: masterUserBody,
      data: schema('User'),
      errors: ['userExists'],
    }),
  },
  '/api/platform/organizations/{organization_id}/users': {
    post: apiOperation({
      operationId: 'createOrganizationUser',
      summary: 'Create an organization user',
      description: USER_EXISTS_DESCRIPTION,
      tags: ['platform'],
      parameters: ORG,
      body: organizationUserBody,
      data: schema('User'),
      errors: [...ORG_ERRORS, 'userExists'],
    }),
  },
  '/api/platform/brute-force-detection': {
    post: apiOperation({
      operationId: 'protectRealms',
      summary: "Turn Keycloak's brute-force detection on in every realm where it is off",
      description:
        'Applies the settings shipped in `realm-export/master.json` (temporary lockout) to every ' +
        'realm, master and organizations, whose brute-force detection is off; a realm where it ' +
        'is on keeps its settings. Safe to repeat. Answers one entry per realm.',
      tags: ['platform'],
      data: arrayOf(schema('RealmProtection')),
    }),
  },
  '/api/platform/organizations/{organization_id}/workspaces/{workspace_id}/operations': {
    post: apiOperation({
      operationId: 'createOperation',
      summary: 'Add an operation to a workspace',
      tags: ['automation'],
      parameters: ORG_WS,
      body: operationBody,
      data: schema('Operation'),
      errors: WS_ERRORS,
    }),
  },
  '/api/platform/token-lifetimes': lifetimesPath('master'),
  '/api/platform/organizations/{organization_id}/token-lifetimes': lifetimesPath('organization'),
  '/api/platform/users/_current/refresh_tokens': refreshTokensPaths('master').all,
  '/api/platform/users/_current/refresh_tokens/{id}': refreshTokensPaths('master').one,
  '/api/{organization_id}/platform/users/_current/refresh_tokens':
    refreshTokensPaths('organization').all,
  '/api/{organization_id}/platform/users/_current/refresh_tokens/{id}':
    refreshTokensPaths('organization').one,
  '/api/{organization_id}/platform/workspaces': {
    get: apiOperation({
      operationId: 'listWorkspaces',
      summary: 'Workspaces the caller has a role for',
      tags: ['platform'],
      parameters: ORG,
      data: arrayOf(schema('Workspace')),
      errors: ORG_API_ERRORS,
    }),
  },
  '/api/{organization_id}/workspaces/{workspace_id}/ita/menu/operation_list/filter/': {
    get: apiOperation({
      operationId: 'listOperations',
      summary: 'All operations of a workspace (role `<ws>` required)',
      tags: ['automation'],
      parameters: ORG_WS,
      data: arrayOf(schema('Operation')),
      errors: ['permissionDenied', 'organizationDisabled', ...WS_ERRORS],
    }),
  },
};

// The list operations join the create operations on the same paths.
for (const [path, item] of Object.entries(userLifecyclePaths())) {
  paths[path] = { ...paths[path], ...item };
}

/** Hand-written schemas (answers, Keycloak's form) and those zod generates, no name twice. */
function componentSchemas(): Record<string, JsonSchema> {
  const all = { ...schemas };
  const generated = [
    componentSchemasOf(REQUEST_SCHEMAS, 'input'),
    componentSchemasOf(RESPONSE_SCHEMAS, 'output'),
  ];
  for (const [name, generatedSchema] of generated.flatMap((g) => Object.entries(g))) {
    if (name in all) throw new Error(`OpenAPI component ${name} is defined twice`);
    all[name] = generatedSchema;
  }
  return all;
}

/**
 * The OpenAPI 3.1 description of the gateway, served at `GET /api/openapi.json`. Error
 * responses are generated from `errorCodes` and request bodies from the zod schemas the routes
 * validate with, so the document cannot drift from what the gateway really accepts and answers.
 */
export const openApiDocument: OpenApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'realmgate',
    version: '0.1.0',
    license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    description:
      'Authentication gateway of the IT-automation platform API, in front of Keycloak. ' +
      'Administrators use realm `master` and `/api/platform/...`; organization users use realm ' +
      '`<organization_id>` and `/api/<organization_id>/...`. Answers use the envelope ' +
      '`{data, message, result, ts}`. On every path: a path that could be read two ways (dot ' +
      'segments in any encoding, `//`, `;`, encoded `/` `\\` `%`, control characters, broken ' +
      'escapes) is 400 `400-00001` before routing; `CONNECT` is 405 `405-00000`; a request not ' +
      'sent within 120 s is 408 `408-00000`; an `Expect` other than `100-continue` is 417 ' +
      '`417-00000`; a request head over 16 KiB is 431 `431-00000`. Too many failed Basic logins ' +
      'for an account or from an address: 429 `429-00001` with `Retry-After`.',
  },
  servers: [{ url: '/' }],
  tags: [
    { name: 'platform', description: 'Organizations, workspaces and users' },
    { name: 'users', description: 'The lifecycle of master and organization users' },
    { name: 'automation', description: 'Menus inside a workspace' },
    { name: 'tokens', description: 'Issuing tokens and their lifetimes' },
    { name: 'health', description: 'Probes and this document' },
  ],
  paths,
  components: {
    securitySchemes: {
      basicAuth: {
        type: 'http',
        scheme: 'basic',
        description:
          'User name and password of the realm the path selects; not for users with two-factor authentication.',
      },
      bearerAuth: {
        type: 'http',
        scheme: 'bearer',
        bearerFormat: 'JWT',
        description: 'Access token from the token endpoint of the realm the path selects.',
      },
    },
    schemas: componentSchemas(),
    parameters: {
      OrganizationId: {
        name: 'organization_id',
        in: 'path',
        required: true,
        schema: schema('OrganizationId'),
      },
      WorkspaceId: {
        name: 'workspace_id',
        in: 'path',
        required: true,
        schema: schema('WorkspaceId'),
      },
      Realm: { name: 'realm', in: 'path', required: true, schema: schema('Realm') },
      RefreshTokenId: { name: 'id', in: 'path', required: true, schema: { type: 'string' } },
      Confirm: {
        name: 'confirm',
        in: 'query',
        required: true,
        description: 'The organization id again, so that no typo deletes an organization.',
        schema: schema('OrganizationId'),
      },
      Username: {
        name: 'username',
        in: 'path',
        required: true,
        schema: { type: 'string', minLength: 1, maxLength: 255 },
      },
      First: {
        name: 'first',
        in: 'query',
        schema: { type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0 },
      },
      Max: {
        name: 'max',
        in: 'query',
        schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
      },
      Search: {
        name: 'search',
        in: 'query',
        schema: { type: 'string', minLength: 1, maxLength: 255 },
      },
    },
  },
};
