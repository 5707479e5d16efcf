import { z } from 'zod';

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
