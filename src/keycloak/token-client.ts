import { apiClientIdOf } from '../tenancy/identifiers.ts';
import { createIntrospector } from './introspection.ts';
import type { KeycloakCalls } from './keycloak-calls.ts';
import { unexpectedAnswer } from './keycloak-failures.ts';

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
 * Keycloak's token endpoint, reached directly (not through our /auth proxy), for Basic logins:
 * a plain form POST through the client layer, which translates every failure (503/504/502).
 */
export function createTokenClient(options: {
  calls: KeycloakCalls;
  /** Secret of `realmgate-gateway`, the confidential client allowed to introspect. */
  gatewayClientSecret: string;
}): TokenClient {
  const { calls } = options;
  return {
    passwordGrant(realm, username, password) {
      const form = new URLSearchParams({
        grant_type: 'password',
        client_id: apiClientIdOf(realm),
        username,
        password,
        scope: 'openid',
      }).toString();
      return calls.exchange(
        'grant',
        `/realms/${encodeURIComponent(realm)}/protocol/openid-connect/token`,
        form,
        grantResultOf,
      );
    },
    isActive: createIntrospector({ calls, clientSecret: options.gatewayClientSecret }),
  };
}

/**
 * Keycloak's answer to a password grant: a token (200), or a refusal of the credentials
 * (`invalid_grant`: 400 since Keycloak 26.6, 401 before). Anything else is a bad answer.
 */
export function grantResultOf(status: number, body: string): PasswordGrantResult {
  const answer = jsonObjectOf(body);
  if (status === 200) {
    const accessToken = answer?.access_token;
    if (typeof accessToken !== 'string' || accessToken === '') {
      throw unexpectedAnswer('password grant', status, 'no access_token');
    }
    const expiresIn = answer?.expires_in;
    return { ok: true, accessToken, expiresIn: typeof expiresIn === 'number' ? expiresIn : 0 };
  }
  const error = answer?.error;
  if (typeof error === 'string' && (error === 'invalid_grant' || status === 401)) {
    const description = answer?.error_description;
    return { ok: false, error, description: typeof description === 'string' ? description : '' };
  }
  throw unexpectedAnswer('password grant', status, typeof error === 'string' ? error : undefined);
}

function jsonObjectOf(body: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === 'object' && value !== null
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}
