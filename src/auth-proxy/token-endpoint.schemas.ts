import { z } from 'zod';
import { JOB_FIELDS, MAX_EXPIRES_IN_SECONDS, TOKEN_NAME } from './job-credentials.ts';

/**
 * Keycloak's token endpoint as the API description shows it (`POST
 * /auth/realms/{realm}/protocol/openid-connect/token`, passed through by auth-proxy.ts): the
 * form it takes and the answers it gives. Keycloak checks the form and writes the answers; the
 * gateway neither validates nor types them, so these document, and nothing else.
 */

export const tokenRequest = z
  .object({
    client_id: z.string().meta({ description: '`_platform-api` or `_<organization_id>-api`' }),
    grant_type: z.enum(['password', 'refresh_token']),
    scope: z
      .string()
      .optional()
      .meta({ examples: ['openid offline_access'] }),
    username: z.string().optional(),
    password: z.string().optional().meta({ format: 'password' }),
    totp: z.string().optional().meta({
      description: 'One-time password, for users with two-factor authentication',
    }),
    refresh_token: z.string().optional(),
    // The gateway's own fields (job-credentials.ts checks them; Keycloak never sees them).
    [JOB_FIELDS.name]: z
      .string()
      .regex(TOKEN_NAME)
      .optional()
      .meta({
        description:
          "Password grant: a name for the refresh token, unique among the user's, not shaped " +
          'like a session id (a UUID).',
      }),
    [JOB_FIELDS.workspaces]: z
      .string()
      .optional()
      .meta({
        description:
          "Password grant: the workspaces the token may reach (a subset of the user's), " +
          'comma-separated; the field may be repeated. Outside them: 403 `403-30001`.',
      }),
    [JOB_FIELDS.readOnly]: z
      .enum(['true', 'false'])
      .optional()
      .meta({ description: 'Password grant: GET, HEAD and OPTIONS only (else 403 `403-30002`).' }),
    [JOB_FIELDS.expiresIn]: z
      .string()
      .regex(/^[1-9][0-9]*$/)
      .optional()
      .meta({
        description: `Password grant: seconds (60 to ${MAX_EXPIRES_IN_SECONDS}) after which the gateway ends the token.`,
      }),
  })
  .meta({ id: 'TokenRequest' });

/** Keycloak's answers may carry fields of its own beyond these: none is refused. */
export const tokenResponse = z
  .looseObject({
    access_token: z.string(),
    expires_in: z.int().meta({ examples: [86400] }),
    refresh_expires_in: z
      .int()
      .optional()
      .meta({ examples: [31536000] }),
    refresh_token: z
      .string()
      .optional()
      .meta({ description: 'Shown only here; it cannot be displayed again.' }),
    token_type: z.literal('Bearer'),
    id_token: z.string().optional(),
    'not-before-policy': z.int().optional(),
    session_state: z.string().optional(),
    scope: z
      .string()
      .optional()
      .meta({ examples: ['openid email profile offline_access'] }),
  })
  .meta({ id: 'TokenResponse' });

export const oauthError = z
  .looseObject({ error: z.string(), error_description: z.string().optional() })
  .meta({ id: 'OAuthError' });
