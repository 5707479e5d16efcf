/**
 * A realm's discovery document as Keycloak serves it through the gateway's `/auth/`: the issuer
 * is the gateway's public URL (`--hostname`), which the CLI's `REALMGATE_URL` need not be; the
 * backchannel endpoints are below the URL it was asked at (`--hostname-backchannel-dynamic`),
 * `baseUrl` with `/auth`.
 */
export function discoveryDocument(baseUrl: string, realm: string): string {
  const issuer = `http://gateway.example/auth/realms/${realm}`;
  return JSON.stringify({
    issuer,
    token_endpoint: `${issuer}/protocol/openid-connect/token`,
    introspection_endpoint: `${baseUrl}/realms/${realm}/protocol/openid-connect/token/introspect`,
    jwks_uri: `${baseUrl}/realms/${realm}/protocol/openid-connect/certs`,
    id_token_signing_alg_values_supported: ['RS256', 'ES256'],
  });
}
