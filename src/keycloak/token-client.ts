import * as oidc from 'openid-client';
import { apiClientIdOf, realmIssuer } from '../tenancy/identifiers.ts';
import { createIntrospector, type Introspect } from './introspection.ts';
import type { KeycloakCalls } from './keycloak-calls.ts';
import { realmConfigurations } from './oidc-clients.ts';
import { isRealmGoneError, REALM_GONE_MESSAGE } from './realm-gone.ts';
import { gatewayDpopKey, type GatewayProof } from './gateway-dpop-key.ts';

/**
 * Outcome of a password grant: an access token (bound by Keycloak to `proofKey`, the thumbprint
 * of the gateway's key, when a proof went with the grant), or Keycloak's refusal.
 */
export type PasswordGrantResult =
  | { ok: true; accessToken: string; expiresIn: number; proofKey?: string }
  | { ok: false; error: string; description: string; realmGone?: true };

/** Keycloak's answer to a grant without a proof on a client that requires DPoP. */
const PROOF_MISSING = Symbol('DPoP proof is missing');

export interface TokenClient {
  /** Logs in on the realm's API client with `scope=openid` (no offline session per call). */
  passwordGrant(realm: string, username: string, password: string): Promise<PasswordGrantResult>;
  /** Asks Keycloak whether the token is still active (RFC 7662), as the gateway's client (see introspection.ts). */
  isActive: Introspect;
}

/**
 * Keycloak's token endpoint, reached directly (not through our /auth proxy), for Basic logins:
 * openid-client's password grant on the realm's public API client, sent through the client
 * layer, which translates every failure (503/504/502). When the realm's API client requires
 * DPoP ("OAuth 2.0 DPoP Bound Access Tokens Enabled"; Keycloak answers a grant without a proof
 * "DPoP proof is missing"), the grant is sent again with a proof of this process's own key
 * (gateway-dpop-key.ts), and every later grant of that realm carries one from the start: Basic
 * is served either way, and the token never leaves the gateway. Not from the start everywhere:
 * Keycloak records each proof's `jti` in its cluster's single-use store, and while a node has
 * just died that write waits for the cluster to drop it (2 s measured in the HA suite), which a
 * grant without a proof does not.
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
  /** Realms whose API client Keycloak said requires a proof; a restart forgets them. */
  const proofRequired = new Set<string>();
  return {
    passwordGrant(realm, username, password) {
      const config = apiClientOf(realm);
      return calls.call(
        'grant',
        async () => {
          if (!proofRequired.has(realm)) {
            const plain = await passwordGrant(config, undefined, username, password);
            if (plain !== PROOF_MISSING) return plain;
            proofRequired.add(realm);
          }
          const proven = await passwordGrant(
            config,
            await proofs.handleFor(config),
            username,
            password,
          );
          if (proven === PROOF_MISSING) throw new Error('Keycloak refused a grant with a proof');
          return proven;
        },
        (result) => !result.ok,
      );
    },
    isActive: createIntrospector({ calls, clientSecret: options.gatewayClientSecret, issuerOf }),
  };
}

/**
 * A password grant, with a proof of the gateway's key when `proof` is given: a token, a refusal
 * of the credentials (`invalid_grant`: 400 since Keycloak 26.6, 401 before) or of the realm
 * (it does not exist: realm-gone.ts), or `PROOF_MISSING`
 * when the client requires a proof and none went. Any other error answer, or a token answer
 * openid-client does not accept, is a bad answer (the layer's `call` makes it a 502).
 */
async function passwordGrant(
  config: oidc.Configuration,
  proof: GatewayProof | undefined,
  username: string,
  password: string,
): Promise<PasswordGrantResult | typeof PROOF_MISSING> {
  try {
    const answer = await oidc.genericGrantRequest(
      config,
      'password',
      { username, password, scope: 'openid' },
      proof && { DPoP: proof.handle },
    );
    return {
      ok: true,
      accessToken: answer.access_token,
      expiresIn: answer.expires_in ?? 0,
      ...(proof && { proofKey: proof.thumbprint }),
    };
  } catch (err) {
    if (!(err instanceof oidc.ResponseBodyError)) throw err;
    // The realm was deleted in Keycloak: a refusal of the login (the client's problem), not a
    // bad answer of Keycloak's.
    if (isRealmGoneError(err)) {
      return { ok: false, error: err.error, description: REALM_GONE_MESSAGE, realmGone: true };
    }
    if (err.error === 'invalid_grant' || err.status === 401) {
      return { ok: false, error: err.error, description: err.error_description ?? '' };
    }
    if (
      err.error === 'invalid_request' &&
      /DPoP proof is missing/i.test(err.error_description ?? '')
    ) {
      return PROOF_MISSING;
    }
    throw err;
  }
}
