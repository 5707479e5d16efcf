/**
 * A realm's discovery document as Keycloak serves it behind the gateway: the issuer is the
 * public URL (`--hostname`), the token endpoint below it, the introspection endpoint below the
 * node's own URL (`--hostname-backchannel-dynamic`). `nodeUrl` is the node's base, with `/auth`.
 */
export function discoveryDocument(nodeUrl: string, realm: string): string {
  const issuer = `http://gateway.example/auth/realms/${realm}`;
  return JSON.stringify({
    issuer,
    token_endpoint: `${issuer}/protocol/openid-connect/token`,
    introspection_endpoint: `${nodeUrl}/realms/${realm}/protocol/openid-connect/token/introspect`,
    jwks_uri: `${nodeUrl}/realms/${realm}/protocol/openid-connect/certs`,
    id_token_signing_alg_values_supported: ['RS256', 'ES256'],
  });
}
