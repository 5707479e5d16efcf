import { errorCodes } from '../envelope/errors.ts';
import type { JsonValue } from './openapi.ts';

/** Reusable pieces of the OpenAPI document: references and the component schemas. */
export const schema = (name: string) => ({ $ref: `#/components/schemas/${name}` });
export const arrayOf = (items: JsonValue) => ({ type: 'array', items });
const nullable = (type: string) => ({ type: [type, 'null'] });
const text = { type: 'string', minLength: 1 };
/** One line: no control character (C0, DEL, C1); NUL cannot be stored at all. */
const oneLine = (maxLength: number) => ({
  ...text,
  maxLength,
  pattern: '^[^\\u0000-\\u001F\\u007F-\\u009F]*$',
});
/** Free text: tab, line feed and carriage return allowed, other control characters not. */
const freeText = (maxLength: number) => ({
  type: 'string',
  maxLength,
  pattern: '^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$',
});
export const EXAMPLE_TS = '2026-01-02T03:04:05.678Z';

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

export function object(
  properties: Record<string, JsonValue>,
  required: string[] = Object.keys(properties),
) {
  return { type: 'object', required, properties };
}

export const schemas: Record<string, { readonly [key: string]: JsonValue }> = {
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
  OrganizationCreate: object({ id: schema('OrganizationId'), name: oneLine(255) }),
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
      name: oneLine(255),
      description: freeText(4000),
      environments: { ...arrayOf(oneLine(255)), maxItems: 100 },
    },
    ['id', 'name'],
  ),
  UserCreate: object(
    {
      username: oneLine(255),
      password: { ...oneLine(1024), format: 'password', writeOnly: true },
      otp_secret: {
        type: 'string',
        maxLength: 512,
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
      operation_name: oneLine(255),
      scheduled_date_for_execution: { type: ['string', 'null'], format: 'date-time' },
      environment: { ...oneLine(255), type: ['string', 'null'] },
      remarks: { ...freeText(4000), type: ['string', 'null'] },
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
  RealmProtection: object({
    realm: schema('Realm'),
    changed: {
      type: 'boolean',
      description: 'True when brute-force detection was off and has just been turned on.',
    },
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
