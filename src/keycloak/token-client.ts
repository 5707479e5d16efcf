import * as oidc from 'openid-client';
import { AppError } from '../envelope/errors.ts';
import { apiClientIdOf } from './identifiers.ts';

/** Outcome of a password grant: an access token, or Keycloak's refusal. */
export type PasswordGrantResult =
  | { ok: true; accessToken: string; expiresIn: number }
  | { ok: false; error: string; description: string };

export interface TokenClient {
  /** Logs in on the realm's API client with `scope=openid` (no offline session per call). */
  passwordGrant(realm: string, username: string, password: string): Promise<PasswordGrantResult>;
}

/**
 * Keycloak's token endpoint, reached directly (not through our /auth proxy), for Basic logins.
 * The issuer is the public one, because that is what Keycloak writes into tokens.
 */
export function createTokenClient(options: {
  keycloakUrl: string;
  publicUrl: string;
  timeoutMs: number;
}): TokenClient {
  const configs = new Map<string, oidc.Configuration>();

  function configFor(realm: string): oidc.Configuration {
    let config = configs.get(realm);
    if (!config) {
      const internal = `${options.keycloakUrl}/realms/${encodeURIComponent(realm)}/protocol/openid-connect`;
      config = new oidc.Configuration(
        {
          issuer: `${options.publicUrl}/auth/realms/${realm}`,
          token_endpoint: `${internal}/token`,
        },
        apiClientIdOf(realm),
      );
      config.timeout = Math.ceil(options.timeoutMs / 1000);
      if (options.keycloakUrl.startsWith('http:')) oidc.allowInsecureRequests(config);
      configs.set(realm, config);
    }
    return config;
  }

  return {
    async passwordGrant(realm, username, password) {
      try {
        const response = await oidc.genericGrantRequest(configFor(realm), 'password', {
          username,
          password,
          scope: 'openid',
        });
        return {
          ok: true,
          accessToken: response.access_token,
          expiresIn: response.expires_in ?? 0,
        };
      } catch (err) {
        return translateGrantError(err);
      }
    },
  };
}

/** Keycloak's answers about the credentials become results; anything else an AppError. */
function translateGrantError(err: unknown): PasswordGrantResult {
  if (err instanceof oidc.ResponseBodyError) {
    if (err.error === 'invalid_grant' || err.status === 401) {
      return { ok: false, error: err.error, description: err.error_description ?? '' };
    }
    throw new AppError('identityProviderBadGateway', { cause: err });
  }
  const name = (err as { name?: string; cause?: { name?: string } } | null)?.name;
  const causeName = (err as { cause?: { name?: string } } | null)?.cause?.name;
  if (name === 'TimeoutError' || causeName === 'TimeoutError') {
    throw new AppError('identityProviderTimeout', { cause: err });
  }
  if (
    err instanceof TypeError ||
    (err instanceof oidc.ClientError && err.cause instanceof TypeError)
  ) {
    throw new AppError('identityProviderUnavailable', { cause: err });
  }
  throw new AppError('identityProviderBadGateway', { cause: err });
}
