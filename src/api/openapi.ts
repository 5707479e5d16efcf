import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import { OVER_SHARE } from '../auth-proxy/auth-proxy.ts';
import { REPEATED_USERNAME, UNRESOLVED_EMAIL } from '../auth-proxy/bootstrap-admin-guard.ts';
import { FORM_BODY_REFUSALS } from '../auth-proxy/form-body-guard.ts';
import { DPOP_PROOF_KEY_REFUSAL } from '../auth-proxy/dpop-proof-key-guard.ts';
import type { Replacement } from '../auth-proxy/grant-answer.ts';
import { JOB_CREDENTIAL_REFUSALS, TOKEN_ENDPOINT_FAILURES } from '../auth-proxy/job-credentials.ts';
import { throttledGrant, UNREAD_GRANT_BODY } from '../auth-proxy/password-attempt-throttle.ts';
import { WRONG_CREDENTIALS } from '../auth-proxy/wrong-credentials.ts';
import { oauthError, tokenRequest, tokenResponse } from '../auth-proxy/token-endpoint.schemas.ts';
import { envelope, errorEnvelope } from '../envelope/envelope.schemas.ts';
import { RESOURCE_METADATA_ROUTES } from '../auth/resource-metadata.ts';
import { AUDIT_KEYS_PATH } from '../audit/audit-keys.router.ts';
import { organizationId, realmName } from '../tenancy/id-schemas.ts';
import { API_ROUTES } from './api-routes.ts';
import {
  errorResponses,
  json,
  success,
  type HttpMethod,
  type OpenApiOperation,
  type OpenApiPaths,
} from './openapi-answers.ts';
import { componentSchemasOfRoutes, pathsOf } from './openapi-routes.ts';
import {
  componentSchemasOf,
  idSchemasIn,
  jsonSchemaOf,
  type JsonSchema,
  type JsonValue,
} from './openapi-zod.ts';

export type { HttpMethod, OpenApiOperation };

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
  paths: OpenApiPaths;
  components: Record<'securitySchemes' | 'schemas' | 'parameters', Record<string, JsonSchema>>;
}

/** The token endpoint's answer to a throttled password grant, as an example. */
const THROTTLED_GRANT = throttledGrant('account_address', 60);

const parameter = (name: string) => ({ $ref: `#/components/parameters/${name}` });

/**
 * The token endpoint's refusals in OAuth's shape below 429: Keycloak's own, as it words them
 * (examples only: Keycloak decides them), then the gateway's, from the code that sends them.
 */
const TOKEN_REFUSALS: readonly Replacement[] = [
  { status: 400, error: 'invalid_request', description: 'Missing form parameter: grant_type' },
  { status: 400, error: 'unsupported_grant_type', description: 'Unsupported grant_type' },
  { status: 400, error: 'invalid_grant', description: 'Account disabled' },
  { status: 400, error: 'invalid_grant', description: 'Session not active' },
  FORM_BODY_REFUSALS.notUtf8,
  FORM_BODY_REFUSALS.malformed,
  FORM_BODY_REFUSALS.charset,
  DPOP_PROOF_KEY_REFUSAL,
  UNREAD_GRANT_BODY,
  REPEATED_USERNAME,
  ...JOB_CREDENTIAL_REFUSALS,
  { status: 401, error: WRONG_CREDENTIALS.error, description: WRONG_CREDENTIALS.error_description },
  {
    status: 401,
    error: 'invalid_client',
    description: 'Invalid client or Invalid client credentials',
  },
];

/** Adds `failure` to `examples` under its `error`, numbered after the first (`invalid_grant_2`). */
function addExample(examples: Record<string, JsonValue>, { error, description }: Replacement) {
  let name = error;
  for (let n = 2; name in examples; n++) name = `${error}_${n}`;
  examples[name] = { value: { error, error_description: description } };
}

/** `examples` with the 429 of an address over its share of a Keycloak node (auth-proxy.ts). */
function overShareAdded(examples: Record<string, JsonValue>): Record<string, JsonValue> {
  addExample(examples, OVER_SHARE);
  return examples;
}

/** The token endpoint's answer at `status` in OAuth's shape, with `TOKEN_REFUSALS`' examples. */
function oauthRefusals(status: number, description: string) {
  const examples: Record<string, JsonValue> = {};
  for (const refusal of TOKEN_REFUSALS) {
    if (refusal.status === status) addExample(examples, refusal);
  }
  return { description, content: json({ schema: jsonSchemaOf(oauthError, 'output'), examples }) };
}

/** The token endpoint's own failures (5xx), the bootstrap administrator's guard's included. */
const GATEWAY_TOKEN_FAILURES: readonly Replacement[] = [
  ...TOKEN_ENDPOINT_FAILURES,
  UNRESOLVED_EMAIL,
];

/** A response of `errorResponses`, as far as `withTokenFailures` reads it. */
interface EnvelopeResponse {
  description: string;
  headers?: JsonValue;
  content: { 'application/json': { examples: Record<string, JsonValue> } };
}

/**
 * `responses` (the gateway's envelope errors) with the token endpoint's own failures in OAuth's
 * shape (job-credentials.ts) under their status: either shape may come, each with its examples.
 */
function withTokenFailures(responses: Record<string, JsonValue>): Record<string, JsonValue> {
  const merged = { ...responses };
  const statuses = new Set(GATEWAY_TOKEN_FAILURES.map(({ status }) => status));
  for (const status of statuses) {
    const failures = GATEWAY_TOKEN_FAILURES.filter((failure) => failure.status === status);
    const given = merged[String(status)] as EnvelopeResponse | undefined;
    const examples: Record<string, JsonValue> = {
      ...given?.content['application/json'].examples,
    };
    for (const failure of failures) addExample(examples, failure);
    const oauth = jsonSchemaOf(oauthError, 'output');
    merged[String(status)] = {
      description: [given?.description, ...failures.map((f) => `${f.error}: ${f.description}`)]
        .filter((part) => part !== undefined)
        .join(' / '),
      ...(given?.headers !== undefined && { headers: given.headers }),
      content: json({
        schema: given ? { oneOf: [jsonSchemaOf(errorEnvelope, 'output'), oauth] } : oauth,
        examples,
      }),
    };
  }
  return merged;
}

/** What the probes answer (http/health.router.ts), as the document shows it. */
const probeOutcome = z.enum(['up', 'degraded', 'down']);
const health = z.object({ status: z.literal('up') });
const readiness = z.record(
  z.string(),
  z.xor([
    probeOutcome,
    z
      .object({
        status: probeOutcome,
        nodes: z.array(
          z.object({
            url: z.string().meta({ format: 'uri' }),
            state: z.enum(['up', 'down']),
            since: z.string().meta({ format: 'date-time' }),
          }),
        ),
      })
      .meta({ description: 'Keycloak with several nodes, on the admin listener' }),
    z
      .object({
        status: probeOutcome,
        url: z.string().meta({ format: 'uri' }),
        pending: z.literal(true).optional(),
        realmsNotSet: z.union([z.array(z.string()), z.string()]).optional(),
        realmsNotSetCount: z.number().int().optional(),
      })
      .meta({
        description:
          "`backchannel_logout`, on the admin listener: the URL every realm's clients of the " +
          'gateway post logout tokens to, and the realms where it, or the gateway in their ' +
          "tokens' audience, could not be set (at most 20 named, all counted), or why none " +
          'could be listed',
      }),
  ]),
);

/** The envelope of a ready answer: its message names what is down or degraded, if anything. */
export const readinessAnswer = envelope.extend({
  data: readiness,
  message: z.union([z.literal('SUCCESS'), z.string().regex(/^Degraded: .+\.$/)]),
});

/** What a protected-resource metadata document holds (auth/resource-metadata.ts). */
const resourceMetadata = z
  .object({
    resource: z.string().meta({ format: 'uri' }),
    authorization_servers: z.array(z.string().meta({ format: 'uri' })),
    dpop_signing_alg_values_supported: z.array(z.string()),
    dpop_bound_access_tokens_required: z.boolean(),
    bearer_methods_supported: z.array(z.literal('header')),
  })
  .meta({ description: 'RFC 9728 protected-resource metadata' });

/** A JWKS of Ed25519 public keys (audit/audit-signing-key.ts). */
const auditKeySet = z
  .object({
    keys: z.array(
      z.object({
        kty: z.literal('OKP'),
        crv: z.literal('Ed25519'),
        x: z.string(),
        kid: z.string(),
        alg: z.literal('EdDSA'),
        use: z.literal('sig'),
      }),
    ),
  })
  .meta({ description: 'JSON Web Key Set (RFC 7517) of the audit signing keys' });

/** The audit checkpoints' public keys (audit/audit-keys.router.ts). */
function auditKeysPaths(): OpenApiPaths {
  const operation: OpenApiOperation = {
    operationId: 'getAuditKeys',
    summary: 'Public keys that sign audit log checkpoints (JWKS)',
    description:
      'Public, plain JSON (no envelope), `application/jwk-set+json`: every key a checkpoint of any audit log may be signed with, the current one and those rotated out. An auditor fetches it here and verifies an export with it (`realmgate audit verify FILE --keys <this URL>`). It reads nothing of the request: a query string and `Accept` are ignored; another method than GET or HEAD is 404, as an unknown path.',
    tags: ['audit'],
    security: [],
    responses: {
      '200': {
        description: 'The key set',
        content: { 'application/jwk-set+json': { schema: jsonSchemaOf(auditKeySet, 'output') } },
      },
      // It reads nothing of the request: its only refusal is the edge's of any request head
      // (edge/edge.ts: one Host header, no transfer coding but chunked), as for the metadata.
      ...errorResponses(['badRequestHeader', 'databaseUnavailable']),
    },
  };
  return { [AUDIT_KEYS_PATH]: { get: operation } };
}

/** The protected-resource metadata documents, one operation per declared route. */
function resourceMetadataPaths(): OpenApiPaths {
  return Object.fromEntries(
    RESOURCE_METADATA_ROUTES.map((route) => {
      const byOrganization = route.path.includes('{organization_id}');
      const operation: OpenApiOperation = {
        operationId: byOrganization
          ? 'getOrganizationResourceMetadata'
          : route.path.endsWith('/api/platform')
            ? 'getPlatformResourceMetadata'
            : 'getResourceMetadata',
        summary: route.summary,
        description:
          'Public, plain JSON (no envelope): the resource identifier (the URL DPoP proofs name, ' +
          'under `PUBLIC_URL`), the realm whose tokens it takes, the DPoP algorithms it ' +
          "accepts and whether the realm's API client requires bound tokens. 401 challenges " +
          'name it in `resource_metadata`.',
        tags: ['tokens'],
        security: [],
        ...(byOrganization && { parameters: [parameter('OrganizationId')] }),
        responses: {
          '200': {
            description: 'The metadata',
            content: json({ schema: jsonSchemaOf(resourceMetadata, 'output') }),
          },
          ...errorResponses([
            'badRequestHeader',
            ...(byOrganization ? (['organizationNotFound', 'organizationDisabled'] as const) : []),
            'identityProviderUnavailable',
          ]),
        },
      };
      return [route.path, { get: operation }];
    }),
  );
}

const paths: OpenApiPaths = {
  '/healthz': {
    get: {
      operationId: 'getHealth',
      summary: 'The process is up',
      tags: ['health'],
      security: [],
      responses: { '200': success(jsonSchemaOf(health, 'output'), 'Up') },
    },
  },
  '/readyz': {
    get: {
      operationId: 'getReadiness',
      summary: 'Keycloak, database and cache answered within 2 s',
      tags: ['health'],
      security: [],
      responses: {
        '200': {
          description:
            'Ready, maybe degraded: serving, with what needs a missing dependency answering 503 ' +
            '(every Keycloak node down: new logins; the database down: list endpoints). ' +
            '`degraded`: serving, but not as configured (Redis down: in-process cache; a ' +
            'Keycloak node down while another answers; `backchannel_logout`: a realm whose ' +
            'clients could not be pointed at the back-channel logout endpoint, or the gateway ' +
            "put in its tokens' audience, its ended sessions left to the re-check).",
          content: json({ schema: jsonSchemaOf(readinessAnswer, 'output') }),
        },
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
        content: {
          'application/x-www-form-urlencoded': { schema: jsonSchemaOf(tokenRequest, 'input') },
        },
      },
      responses: {
        '200': {
          description: 'Tokens',
          content: json({ schema: jsonSchemaOf(tokenResponse, 'output') }),
        },
        '400': oauthRefusals(
          400,
          'invalid_request (a malformed form body, a missing form field, a job credential’s field refused), unsupported_grant_type, invalid_dpop_proof (a DPoP proof Keycloak refuses, or whose alg is outside DPOP_ALGORITHMS or RSA key under 2048 bits), or another invalid_grant (a disabled account, a refresh token no longer valid)',
        ),
        '401': oauthRefusals(
          401,
          'invalid_grant "Invalid user credentials" (wrong user name, password or one-time password: Keycloak answers 400 since 26.6, the gateway 401 as before), or invalid_client',
        ),
        [String(THROTTLED_GRANT.status)]: {
          description:
            'too_many_attempts: too many failed password attempts of this account from this ' +
            'address, or from this address (the login throttle, shared with Basic logins on the ' +
            `API); ${OVER_SHARE.error}: ${OVER_SHARE.description} (the address holds its share ` +
            'of the gateway’s connections to Keycloak); `Retry-After` says when to try again',
          headers: { 'Retry-After': { schema: { type: 'integer' } } },
          content: json({
            schema: jsonSchemaOf(oauthError, 'output'),
            examples: overShareAdded({
              [THROTTLED_GRANT.body.error]: { value: THROTTLED_GRANT.body },
            }),
          }),
        },
        ...withTokenFailures(
          errorResponses([
            'payloadTooLarge',
            'identityProviderBadGateway',
            'identityProviderUnavailable',
            'identityProviderTimeout',
          ]),
        ),
      },
    },
  },
  // Every `/api` route but this document's own, from the route tables.
  ...pathsOf(API_ROUTES),
  ...resourceMetadataPaths(),
  ...auditKeysPaths(),
};

/**
 * The component schemas, every one generated by zod: those the route tables use (path ids,
 * queries, bodies, answers), the envelope, and Keycloak's token endpoint. A schema both sent
 * and answered (an id) must read the same both ways: one component, no name twice.
 */
function componentSchemas(): Record<string, JsonSchema> {
  const routes = componentSchemasOfRoutes(API_ROUTES);
  const input = idSchemasIn([...routes.input, realmName, tokenRequest]);
  const output = idSchemasIn([
    ...routes.output,
    envelope,
    errorEnvelope,
    tokenResponse,
    oauthError,
  ]);
  const all = componentSchemasOf(input, 'input');
  for (const [name, schema] of Object.entries(componentSchemasOf(output, 'output'))) {
    if (name in all && !isDeepStrictEqual(all[name], schema)) {
      throw new Error(`OpenAPI component ${name} reads differently sent and answered`);
    }
    all[name] = schema;
  }
  return all;
}

/**
 * The OpenAPI 3.1 description of the gateway, served at `GET /api/openapi.json`. Error
 * responses are generated from `errorCodes`, and every schema from the zod schemas the routes
 * validate their input with and type their answers with, so the document cannot drift from
 * what the gateway really accepts and answers.
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
      dpopAuth: {
        type: 'http',
        scheme: 'DPoP',
        description:
          'A token bound to a key (RFC 9449: obtained with a `DPoP` proof header, `token_type` `DPoP`), with a fresh proof of that key for this request in the one `DPoP` header; a bound token is refused as Bearer.',
      },
    },
    schemas: componentSchemas(),
    parameters: {
      Realm: {
        name: 'realm',
        in: 'path',
        required: true,
        schema: jsonSchemaOf(realmName, 'input'),
      },
      OrganizationId: {
        name: 'organization_id',
        in: 'path',
        required: true,
        schema: jsonSchemaOf(organizationId, 'input'),
      },
    },
  },
};
