import * as oidc from 'openid-client';
import { apiClientIdOf, realmIssuer } from '../tenancy/identifiers.ts';
import { createIntrospector } from './introspection.ts';
import type { KeycloakCalls } from './keycloak-calls.ts';
import { realmConfigurations } from './oidc-clients.ts';
import { gatewayDpopKey, type GatewayProof } from './gateway-dpop-key.ts';

/**
 * Outcome of a password grant: an access token (bound by Keycloak to `proofKey`, the thumbprint
 * of the gateway's key whose proof went with the grant), or Keycloak's refusal.
 */
export type PasswordGrantResult =
  | { ok: true; accessToken: string; expiresIn: number; proofKey: string }
  | { ok: false; error: string; description: string };

export interface TokenClient {
  /** Logs in on the realm's API client with `scope=openid` (no offline session per call). */
  passwordGrant(realm: string, username: string, password: string): Promise<PasswordGrantResult>;
  /** Asks Keycloak whether the token is still active (RFC 7662), as the gateway's client (see introspection.ts). */
  isActive(realm: string, token: string): Promise<boolean>;
}

/**
 * Keycloak's token endpoint, reached directly (not through our /auth proxy), for Basic logins:
 * openid-client's password grant on the realm's public API client, sent through the client
 * layer, which translates every failure (503/504/502). Every grant carries a DPoP proof of this
 * process's own key (gateway-dpop-key.ts), so a client that requires DPoP ("OAuth 2.0 DPoP Bound
 * Access Tokens Enabled") still serves Basic; the token it gets never leaves the gateway.
 */
export function createTokenClient(options: {
  calls: KeycloakCalls;
  /** Secret of `realmgate-gateway`, the confidential client allowed to introspect. */
  gatewayClientSecret: string;
  /** `PUBLIC_URL`: the issuer of a realm's tokens is `PUBLIC_URL/auth/realms/<realm>`. */
  publicUrl: string;
}): TokenClient {
  const { calls } = options;
  const issuerOf = (realm: string) => realmIssuer(options.publicUrl, realm);
  const apiClientOf = realmConfigurations(calls, 'grant', issuerOf, (realm) => ({
    id: apiClientIdOf(realm),
    auth: oidc.None(),
  }));
  const proofs = gatewayDpopKey();
  return {
    passwordGrant(realm, username, password) {
      const config = apiClientOf(realm);
      return calls.call(
        'grant',
        async () => passwordGrant(config, await proofs.handleFor(config), username, password),
        (result) => !result.ok,
      );
    },
    isActive: createIntrospector({ calls, clientSecret: options.gatewayClientSecret, issuerOf }),
  };
}

/**
 * A password grant: a token, or a refusal of the credentials (`invalid_grant`: 400 since
 * Keycloak 26.6, 401 before). Any other error answer, or a token answer openid-client does not
 * accept, is a bad answer (the layer's `call` makes it a 502).
 */
async function passwordGrant(
  config: oidc.Configuration,
  proof: GatewayProof,
  username: string,
  password: string,
): Promise<PasswordGrantResult> {
  try {
    const answer = await oidc.genericGrantRequest(
      config,
      'password',
      { username, password, scope: 'openid' },
      { DPoP: proof.handle },
    );
    return {
      ok: true,
      accessToken: answer.access_token,
      expiresIn: answer.expires_in ?? 0,
      proofKey: proof.thumbprint,
    };
  } catch (err) {
    if (
      err instanceof oidc.ResponseBodyError &&
      (err.error === 'invalid_grant' || err.status === 401)
    ) {
      return { ok: false, error: err.error, description: err.error_description ?? '' };
    }
    throw err;
  }
}
