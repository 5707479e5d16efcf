import * as oidc from 'openid-client';
import { AppError } from '../envelope/errors.ts';
import { apiClientIdOf } from './identifiers.ts';
import { createIntrospector } from './introspection.ts';

/** Outcome of a password grant: an access token, or Keycloak's refusal. */
export type PasswordGrantResult =
  | { ok: true; accessToken: string; expiresIn: number }
  | { ok: false; error: string; description: string };

export interface TokenClient {
  /** Logs in on the realm's API client with `scope=openid` (no offline session per call). */
  passwordGrant(realm: string, username: string, password: string): Promise<PasswordGrantResult>;
  /** Asks Keycloak whether the token is still active (RFC 7662), as the gateway's client (see introspection.ts). */
  isActive(realm: string, token: string): Promise<boolean>;
}

/**
 * Keycloak's token endpoint, reached directly (not through our /auth proxy), for Basic logins.
 * The issuer is the public one, because that is what Keycloak writes into tokens.
 */
export function createTokenClient(options: {
  keycloakUrl: string;
  publicUrl: string;
  timeoutMs: number;
  /** Secret of `realmgate-gateway`, the confidential client allowed to introspect. */
  gatewayClientSecret: string;
}): TokenClient {
  const apiConfigs = new Map<string, oidc.Configuration>();
  const introspect = createIntrospector({
    keycloakUrl: options.keycloakUrl,
    timeoutMs: options.timeoutMs,
    clientSecret: options.gatewayClientSecret,
  });

  function apiConfigFor(realm: string): oidc.Configuration {
    let config = apiConfigs.get(realm);
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
      apiConfigs.set(realm, config);
    }
    return config;
  }

  return {
    async passwordGrant(realm, username, password) {
      try {
        const response = await oidc.genericGrantRequest(apiConfigFor(realm), 'password', {
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
    isActive: introspect,
  };
}

/** Keycloak's answers about the credentials become results; anything else an AppError. */
function translateGrantError(err: unknown): PasswordGrantResult {
  if (
    err instanceof oidc.ResponseBodyError &&
    (err.error === 'invalid_grant' || err.status === 401)
  ) {
    return { ok: false, error: err.error, description: err.error_description ?? '' };
  }
  throw keycloakFailure(err);
}

/** Why a call to Keycloak failed, in the terms a client can act on (retry later or not). */
function keycloakFailure(err: unknown): AppError {
  if (err instanceof oidc.ResponseBodyError)
    return new AppError('identityProviderBadGateway', { cause: err });
  const name = (err as { name?: string } | null)?.name;
  const causeName = (err as { cause?: { name?: string } } | null)?.cause?.name;
  if (name === 'TimeoutError' || causeName === 'TimeoutError') {
    return new AppError('identityProviderTimeout', { cause: err });
  }
  if (
    err instanceof TypeError ||
    (err instanceof oidc.ClientError && err.cause instanceof TypeError)
  ) {
    return new AppError('identityProviderUnavailable', { cause: err });
  }
  return new AppError('identityProviderBadGateway', { cause: err });
}
