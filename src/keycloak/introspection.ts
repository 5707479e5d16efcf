import * as oidc from 'openid-client';
import type { KeycloakCalls } from './keycloak-calls.ts';
import { realmConfigurations } from './oidc-clients.ts';
import { GATEWAY_CLIENT_ID } from './service-admin.ts';

/** Whether Keycloak still considers a token active (RFC 7662). */
export type Introspect = (realm: string, token: string) => Promise<boolean>;

/**
 * Token introspection as the gateway's confidential client, by openid-client over the client
 * layer (its keep-alive pool: background re-checks run at up to 50 a second per replica, on the
 * CPU that serves requests). Failures are AppErrors: 503 unreachable, 504 too slow, 502
 * anything but a 200 JSON `active` (a refused gateway client is the gateway's problem).
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
      async () => (await oidc.tokenIntrospection(config, token)).active,
    );
  };
}
