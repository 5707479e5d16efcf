import { errorCodes, type ErrorCode } from '../envelope/errors.ts';

/** Any JSON value; the document is data, served as is. */
export type JsonValue =
  string | number | boolean | null | readonly JsonValue[] | { readonly [key: string]: JsonValue };

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** The parts of an OpenAPI operation the tests and the document rely on. */
export interface OpenApiOperation {
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /** Omitted: no authentication. Never the empty list at top level (there is none). */
  security?: Record<string, string[]>[];
  parameters?: JsonValue[];
  requestBody?: JsonValue;
  responses: Record<string, JsonValue>;
}

export interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string; description: string };
  servers: { url: string }[];
  tags: { name: string; description: string }[];
  paths: Record<string, Partial<Record<HttpMethod, OpenApiOperation>>>;
  components: Record<
    'securitySchemes' | 'schemas' | 'parameters',
    Record<string, { readonly [key: string]: JsonValue }>
  >;
}

const schema = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const parameter = (name: string) => ({ $ref: `#/components/parameters/${name}` });
const arrayOf = (items: JsonValue) => ({ type: 'array', items });
const nullable = (type: string) => ({ type: [type, 'null'] });
const text = { type: 'string', minLength: 1 };
const EXAMPLE_TS = '2026-01-02T03:04:05.678Z';

/** Either scheme works on every platform and automation API (spec 4, 5). */
const API_SECURITY: Record<string, string[]>[] = [{ basicAuth: [] }, { bearerAuth: [] }];
/** Every authenticated call can fail on the header, the credentials or an absent Keycloak. */
const AUTH_ERRORS: ErrorCode[] = [
  'badRequestHeader',
  'authenticationFailed',
  'identityProviderUnavailable',
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
      ...(status === 503 && { headers: { 'Retry-After': { schema: { type: 'integer' } } } }),
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
  body?: string;
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
      requestBody: { required: true, content: json({ schema: schema(spec.body) }) },
    }),
    responses: { '200': success(spec.data, 'SUCCESS'), ...errorResponses(errors) },
  };
}

const ORG = ['OrganizationId'];
const ORG_WS = ['OrganizationId', 'WorkspaceId'];
const ORG_ERRORS: ErrorCode[] = ['organizationNotFound'];
const WS_ERRORS: ErrorCode[] = ['organizationNotFound', 'workspaceNotFound'];
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
      body: 'TokenLifetimesPatch',
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
  const orgErrors = realm === 'master' ? [] : ORG_ERRORS;
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

const timestamp = { type: 'string', format: 'date-time', examples: [EXAMPLE_TS] };
const seconds = { type: 'integer', minimum: 1, maximum: 2_147_483_647 };
const TOKEN_LIFETIME_FIELDS = {
  access_token_lifespan: { ...seconds, description: 'Access token lifespan of the API client' },
  client_session_idle_timeout: { ...seconds, description: 'Client session idle of the API client' },
  client_session_max_lifespan: { ...seconds, description: 'Client session max of the API client' },
  offline_session_idle_timeout: { ...seconds, description: 'Offline session idle of the realm' },
  offline_session_max_lifespan: { ...seconds, description: 'Offline session max of the realm' },
  offline_session_max_lifespan_enabled: {
    type: 'boolean',
    description: 'Offline session max limited',
  },
};
const RESULT_CODES = Object.values(errorCodes)
  .map(({ status, result, message }) => `\`${result}\` (${status}) ${message}`)
  .join('\n- ');

function object(
  properties: Record<string, JsonValue>,
  required: string[] = Object.keys(properties),
) {
  return { type: 'object', required, properties };
}

const schemas: Record<string, { readonly [key: string]: JsonValue }> = {
  OrganizationId: {
    type: 'string',
    pattern: '^[a-z][a-z0-9_-]{0,35}$',
    // `master` is the administrators' realm, the others are path segments of their own.
    not: { enum: ['master', 'platform', 'admin', 'auth', 'api'] },
    description: 'Organization id, also the name of its Keycloak realm.',
    examples: ['demo-org'],
  },
  WorkspaceId: {
    type: 'string',
    pattern: '^[A-Za-z0-9][A-Za-z0-9_-]{0,35}$',
    examples: ['demo-ws'],
  },
  Realm: {
    anyOf: [{ const: 'master' }, schema('OrganizationId')],
    description: '`master` for system administrators, else an organization id.',
  },
  Envelope: {
    ...object({
      data: { description: 'Payload: object, array, or null.' },
      message: { const: 'SUCCESS' },
      result: { const: '000-00000' },
      ts: timestamp,
    }),
    description: 'The platform envelope of a successful answer (spec 2.1).',
  },
  ErrorEnvelope: {
    ...object({
      data: { description: 'null, or details safe to show (never credentials).' },
      message: { type: 'string', description: 'Human-readable; 5xx messages stay generic.' },
      result: { type: 'string', pattern: '^[1-5][0-9]{2}-[0-9]{5}$' },
      ts: timestamp,
    }),
    description: `The envelope of a failure. \`result\` is \`SSS-FFNNN\` (HTTP status, function, sequence):\n- ${RESULT_CODES}`,
  },
  RefreshToken: {
    ...object({
      id: { type: 'string', description: 'Keycloak offline session id.' },
      start_timestamp: timestamp,
      lastaccess_timestamp: timestamp,
      expire_timestamp: timestamp,
    }),
    description:
      'A refresh token of the caller (spec 2.3). Expiry is the earlier of start + offline max ' +
      'lifespan (when enabled) and last access + offline idle timeout.',
  },
  Organization: object({
    id: schema('OrganizationId'),
    name: { type: 'string' },
    enabled: { type: 'boolean' },
    status: { type: 'string' },
    create_timestamp: timestamp,
    last_update_timestamp: timestamp,
  }),
  OrganizationCreate: object({ id: schema('OrganizationId'), name: text }),
  Workspace: object({
    id: schema('WorkspaceId'),
    name: { type: 'string' },
    informations: object({
      environments: arrayOf(object({ name: { type: 'string' } })),
      description: { type: 'string' },
    }),
    create_timestamp: timestamp,
    create_user: { type: 'string' },
    last_update_timestamp: timestamp,
    last_update_user: { type: 'string' },
  }),
  WorkspaceCreate: object(
    {
      id: schema('WorkspaceId'),
      name: text,
      description: { type: 'string' },
      environments: arrayOf(text),
    },
    ['id', 'name'],
  ),
  UserCreate: object(
    {
      username: text,
      password: { ...text, format: 'password', writeOnly: true },
      otp_secret: {
        type: 'string',
        pattern: '^[A-Z2-7]+=*$',
        writeOnly: true,
        description: 'Base32 TOTP secret; the user must then log in with `totp` (Bearer only).',
      },
    },
    ['username', 'password'],
  ),
  OrganizationUserCreate: {
    allOf: [
      schema('UserCreate'),
      {
        type: 'object',
        properties: {
          workspaces: {
            ...arrayOf(schema('WorkspaceId')),
            description: 'Workspaces the user gets role `<ws>` on.',
          },
        },
      },
    ],
  },
  User: object({
    id: { type: 'string' },
    username: { type: 'string' },
    realm: schema('Realm'),
    workspaces: arrayOf(schema('WorkspaceId')),
  }),
  OperationCreate: object(
    {
      operation_name: text,
      scheduled_date_for_execution: { type: 'string', format: 'date-time' },
      environment: { type: 'string' },
      remarks: { type: 'string' },
    },
    ['operation_name'],
  ),
  Operation: object({
    parameter: object({
      operation_id: { type: 'string' },
      operation_name: { type: 'string' },
      scheduled_date_for_execution: { ...nullable('string'), format: 'date-time' },
      last_run_date: { ...nullable('string'), format: 'date-time' },
      environment: nullable('string'),
      remarks: nullable('string'),
      discard: { type: 'boolean' },
      last_update_date_time: timestamp,
      last_updated_user: { type: 'string' },
    }),
    file: { type: 'object', maxProperties: 0, description: 'Always empty.' },
  }),
  TokenLifetimes: object(TOKEN_LIFETIME_FIELDS),
  TokenLifetimesPatch: {
    ...object(TOKEN_LIFETIME_FIELDS, []),
    minProperties: 1,
    additionalProperties: false,
  },
  TokenRequest: object(
    {
      client_id: { type: 'string', description: '`_platform-api` or `_<organization_id>-api`' },
      grant_type: { enum: ['password', 'refresh_token'] },
      scope: { type: 'string', examples: ['openid offline_access'] },
      username: { type: 'string' },
      password: { type: 'string', format: 'password' },
      totp: {
        type: 'string',
        description: 'One-time password, for users with two-factor authentication',
      },
      refresh_token: { type: 'string' },
    },
    ['client_id', 'grant_type'],
  ),
  TokenResponse: object(
    {
      access_token: { type: 'string' },
      expires_in: { type: 'integer', examples: [86400] },
      refresh_expires_in: { type: 'integer', examples: [31536000] },
      refresh_token: {
        type: 'string',
        description: 'Shown only here; it cannot be displayed again.',
      },
      token_type: { const: 'Bearer' },
      id_token: { type: 'string' },
      'not-before-policy': { type: 'integer' },
      session_state: { type: 'string' },
      scope: { type: 'string', examples: ['openid email profile offline_access'] },
    },
    ['access_token', 'expires_in', 'token_type'],
  ),
  OAuthError: object({ error: { type: 'string' }, error_description: { type: 'string' } }, [
    'error',
  ]),
};

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
      responses: { '200': success(object({ status: { const: 'up' } }), 'Up') },
    },
  },
  '/readyz': {
    get: {
      operationId: 'getReadiness',
      summary: 'Keycloak, database and cache answered within 2 s',
      tags: ['health'],
      responses: {
        '200': success({ type: 'object', additionalProperties: { enum: ['up', 'down'] } }, 'Ready'),
        ...errorResponses(['notReady']),
      },
    },
  },
  '/api/openapi.json': {
    get: {
      operationId: 'getOpenApiDocument',
      summary: 'This document',
      tags: ['health'],
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
      body: 'OrganizationCreate',
      data: schema('Organization'),
    }),
  },
  '/api/platform/organizations/{organization_id}/workspaces': {
    post: apiOperation({
      operationId: 'createWorkspace',
      summary: 'Create a workspace (record and roles `<ws>`, `_<ws>-admin`)',
      tags: ['platform'],
      parameters: ORG,
      body: 'WorkspaceCreate',
      data: schema('Workspace'),
      errors: ORG_ERRORS,
    }),
  },
  '/api/platform/users': {
    post: apiOperation({
      operationId: 'createMasterUser',
      summary: 'Create a system administrator (realm master)',
      tags: ['platform'],
      body: 'UserCreate',
      data: schema('User'),
    }),
  },
  '/api/platform/organizations/{organization_id}/users': {
    post: apiOperation({
      operationId: 'createOrganizationUser',
      summary: 'Create an organization user',
      tags: ['platform'],
      parameters: ORG,
      body: 'OrganizationUserCreate',
      data: schema('User'),
      errors: ORG_ERRORS,
    }),
  },
  '/api/platform/organizations/{organization_id}/workspaces/{workspace_id}/operations': {
    post: apiOperation({
      operationId: 'createOperation',
      summary: 'Add an operation to a workspace',
      tags: ['automation'],
      parameters: ORG_WS,
      body: 'OperationCreate',
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
      errors: ORG_ERRORS,
    }),
  },
  '/api/{organization_id}/workspaces/{workspace_id}/ita/menu/operation_list/filter/': {
    get: apiOperation({
      operationId: 'listOperations',
      summary: 'All operations of a workspace (role `<ws>` required)',
      tags: ['automation'],
      parameters: ORG_WS,
      data: arrayOf(schema('Operation')),
      errors: ['permissionDenied', ...WS_ERRORS],
    }),
  },
};

/**
 * The OpenAPI 3.1 description of the gateway, served at `GET /api/openapi.json`. Error
 * responses are generated from `errorCodes`, so the document cannot drift from the codes the
 * gateway really answers with.
 */
export const openApiDocument: OpenApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'realmgate',
    version: '0.1.0',
    description:
      'Authentication gateway of the IT-automation platform API, in front of Keycloak. ' +
      'Administrators use realm `master` and `/api/platform/...`; organization users use realm ' +
      '`<organization_id>` and `/api/<organization_id>/...`. Answers use the envelope ' +
      '`{data, message, result, ts}`.',
  },
  servers: [{ url: '/' }],
  tags: [
    { name: 'platform', description: 'Organizations, workspaces and users' },
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
    schemas,
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
    },
  },
};
