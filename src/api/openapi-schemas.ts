import { errorCodes } from '../envelope/errors.ts';
import type { JsonValue } from './openapi-zod.ts';

/** Reusable pieces of the OpenAPI document: references and the component schemas. */
export const schema = (name: string) => ({ $ref: `#/components/schemas/${name}` });
export const arrayOf = (items: JsonValue) => ({ type: 'array', items });
const nullable = (type: string) => ({ type: [type, 'null'] });
export const EXAMPLE_TS = '2026-01-02T03:04:05.678Z';

const timestamp = { type: 'string', format: 'date-time', examples: [EXAMPLE_TS] };
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
  Organization: object({
    id: schema('OrganizationId'),
    name: { type: 'string' },
    enabled: { type: 'boolean' },
    status: { type: 'string' },
    create_timestamp: timestamp,
    last_update_timestamp: timestamp,
  }),
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
  User: object({
    id: { type: 'string' },
    username: { type: 'string' },
    realm: schema('Realm'),
    workspaces: arrayOf(schema('WorkspaceId')),
  }),
  UserRecord: object(
    {
      id: { type: 'string' },
      username: { type: 'string' },
      enabled: { type: 'boolean' },
      realm: schema('Realm'),
      workspaces: {
        ...arrayOf(schema('WorkspaceId')),
        description: 'Organization users only: the workspaces whose role `<ws>` the user holds.',
      },
      created_timestamp: { ...nullable('string'), format: 'date-time' },
    },
    ['id', 'username', 'enabled', 'realm', 'created_timestamp'],
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
