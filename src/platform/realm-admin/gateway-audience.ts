import type { KeycloakAdmin } from '../../keycloak/admin-client.ts';
import { everyPage, isHttpStatus } from '../../keycloak/admin-client.ts';
import { GATEWAY_CLIENT_ID } from '../../keycloak/service-admin.ts';

/** The realm's client scope that names the gateway's client in every access token's audience. */
export const GATEWAY_AUDIENCE_SCOPE = 'realmgate-gateway-audience';

/**
 * Keycloak answers an introspection `active: false` when the asking client is not in the token's
 * `aud`. The gateway re-checks every Bearer token as its own client (REVOCATION_CHECK_SECONDS),
 * so every client's access tokens must name it, or a browser client's live tokens are refused
 * at their first re-check. This makes a default client scope of the realm (for the clients made
 * after) with an audience mapper, and makes it a default scope of every client already there.
 * Safe to repeat: what exists is kept.
 */
export async function ensureGatewayAudience(admin: KeycloakAdmin, realm: string): Promise<void> {
  let scope = await admin.clientScopes.findOneByName({ realm, name: GATEWAY_AUDIENCE_SCOPE });
  if (!scope) {
    try {
      await admin.clientScopes.create({
        realm,
        name: GATEWAY_AUDIENCE_SCOPE,
        description: "Puts realmgate's client in access tokens' audience (its re-check)",
        protocol: 'openid-connect',
        attributes: { 'include.in.token.scope': 'false', 'display.on.consent.screen': 'false' },
        protocolMappers: [
          {
            name: `audience ${GATEWAY_CLIENT_ID}`,
            protocol: 'openid-connect',
            protocolMapper: 'oidc-audience-mapper',
            config: {
              'included.client.audience': GATEWAY_CLIENT_ID,
              'access.token.claim': 'true',
              'id.token.claim': 'false',
              'introspection.token.claim': 'true',
            },
          },
        ],
      });
    } catch (err) {
      if (!isHttpStatus(err, 409)) throw err;
    }
    scope = await admin.clientScopes.findOneByName({ realm, name: GATEWAY_AUDIENCE_SCOPE });
  }
  const id = scope!.id!;
  // The client's typing omits the realm this call takes like every other.
  const listRealmDefaults = admin.clientScopes.listDefaultClientScopes as unknown as (query: {
    realm: string;
  }) => Promise<Array<{ id?: string }>>;
  const realmDefaults = await listRealmDefaults.call(admin.clientScopes, { realm });
  if (!realmDefaults.some((s) => s.id === id)) {
    await admin.clientScopes.addDefaultClientScope({ realm, id });
  }
  const clients = await everyPage(100, (first, max) => admin.clients.find({ realm, first, max }));
  for (const client of clients) {
    // A bearer-only client is issued no tokens (and Keycloak refuses changes to realm-management).
    if (client.bearerOnly) continue;
    if (client.protocol !== undefined && client.protocol !== 'openid-connect') continue;
    if (client.defaultClientScopes?.includes(GATEWAY_AUDIENCE_SCOPE)) continue;
    await admin.clients.addDefaultClientScope({ realm, id: client.id!, clientScopeId: id });
  }
}
