import * as oidc from 'openid-client';
import type { KeycloakCalls } from './keycloak-calls.ts';
import { realmConfigurations } from './oidc-clients.ts';
import { isRealmGoneError } from './realm-gone.ts';
import { GATEWAY_CLIENT_ID } from './service-admin.ts';

/**
 * Whether Keycloak still considers a token active (RFC 7662), or `REALM_GONE` when the token's
 * realm does not exist there any more (deleted): no token of it is active.
 */
export type Introspect = (realm: string, token: string) => Promise<boolean | typeof REALM_GONE>;

/** Introspection's answer for a realm Keycloak does not have (realm-gone.ts). */
export const REALM_GONE = 'realm_gone';

/**
 * Token introspection as the gateway's confidential client, by openid-client over the client
 * layer (its keep-alive pool: background re-checks run at up to 50 a second per replica, on the
 * CPU that serves requests). Failures are AppErrors: 503 unreachable, 504 too slow, 502
 * anything but a 200 JSON `active` (a refused gateway client is the gateway's problem) or
 * Keycloak's answer that the realm does not exist, which is the realm's, counted `refused`.
 */
export function createIntrospector(options: {
  calls: KeycloakCalls;
  clientSecret: string;
  /**
   * The realm's issuer (`PUBLIC_URL/auth/realms/<realm>`). Introspection compares none (its
   * answer is plain JSON), so the node's own realm URL stands in by default.
   */
  issuerOf?: (realm: string) => string;
}): Introspect {
  const { calls } = options;
  const gatewayClient = {
    id: GATEWAY_CLIENT_ID,
    auth: oidc.ClientSecretPost(options.clientSecret),
  };
  const configurationOf = realmConfigurations(
    calls,
    'introspection',
    options.issuerOf ?? ((realm) => `${calls.keycloakUrl}/realms/${realm}`),
    () => gatewayClient,
  );
  return (realm, token) => {
    const config = configurationOf(realm);
    return calls.call(
      'introspection',
      async () => {
        try {
          return (await oidc.tokenIntrospection(config, token)).active;
        } catch (err) {
          if (isRealmGoneError(err)) return REALM_GONE;
          throw err;
        }
      },
      (answer) => answer === REALM_GONE,
    );
  };
}
