import type { KeycloakAdmin } from '../../keycloak/admin-client.ts';
import { isRealmMissing } from '../../keycloak/realm-gone.ts';
import { GATEWAY_CLIENT_ID } from '../../keycloak/service-admin.ts';
import { madeOrPresent } from './made-or-present.ts';

/** The realm's built-in client scope (Keycloak 25+) that every client it makes has by default. */
const BASIC_SCOPE = 'basic';

/** The mapper's name in that scope: what tells a realm that has it from one that does not. */
export const GATEWAY_AUDIENCE_MAPPER = `audience ${GATEWAY_CLIENT_ID}`;

/**
 * Keycloak answers an introspection `active: false` when the asking client is not in the
 * token's `aud`, and the gateway re-checks every Bearer token as its own client
 * (REVOCATION_CHECK_SECONDS): so every client's access tokens must name it, or a browser
 * client's live tokens are refused at their first re-check. One audience mapper in the realm's
 * `basic` scope does it for every client, present and future, in two admin calls (a change to
 * each client would cost one per client). A client an administrator took `basic` from gets
 * tokens without `sub` (that scope's other mapper), which the Bearer verifier refuses anyway.
 * Resolves to whether it added the mapper; a realm without `basic` (deleted since it was
 * listed, or not made by Keycloak 25+) is left alone. Safe to repeat and to race: a refused
 * addition counts as done when the mapper is there (made-or-present.ts), and twins that both
 * pass the look-up may leave two identical mappers (`aud` stays one entry).
 */
export async function ensureGatewayAudience(admin: KeycloakAdmin, realm: string): Promise<boolean> {
  let scopes;
  try {
    scopes = await admin.clientScopes.find({ realm });
  } catch (err) {
    if (isRealmMissing(err)) return false;
    throw err;
  }
  const basic = scopes.find((scope) => scope.name === BASIC_SCOPE);
  if (basic?.id === undefined) return false;
  if (basic.protocolMappers?.some((mapper) => mapper.name === GATEWAY_AUDIENCE_MAPPER)) {
    return false;
  }
  const basicId = basic.id;
  return madeOrPresent(
    () =>
      admin.clientScopes.addProtocolMapper(
        { realm, id: basicId },
        {
          name: GATEWAY_AUDIENCE_MAPPER,
          protocol: 'openid-connect',
          protocolMapper: 'oidc-audience-mapper',
          config: {
            'included.client.audience': GATEWAY_CLIENT_ID,
            'access.token.claim': 'true',
            'introspection.token.claim': 'true',
            'id.token.claim': 'false',
          },
        },
      ),
    () => hasGatewayAudience(admin, realm, basicId),
  );
}

/** Whether the realm's `basic` scope holds the mapper now (a concurrent twin's, say). */
async function hasGatewayAudience(
  admin: KeycloakAdmin,
  realm: string,
  basicId: string,
): Promise<boolean> {
  const mappers = await admin.clientScopes.listProtocolMappers({ realm, id: basicId });
  return mappers.some((mapper) => mapper.name === GATEWAY_AUDIENCE_MAPPER);
}
