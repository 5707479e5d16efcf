import KcAdminClient from '@keycloak/keycloak-admin-client';

export type KeycloakAdmin = KcAdminClient;

/**
 * An admin-API client logged in as Keycloak's bootstrap administrator (master realm,
 * `admin-cli`). Used for provisioning realms and users, never on the request path.
 */
export async function loginAsBootstrapAdmin(options: {
  keycloakUrl: string;
  username: string;
  password: string;
  timeoutMs: number;
}): Promise<KeycloakAdmin> {
  const admin = new KcAdminClient({
    baseUrl: options.keycloakUrl,
    realmName: 'master',
    timeout: options.timeoutMs,
  });
  await admin.auth({
    grantType: 'password',
    clientId: 'admin-cli',
    username: options.username,
    password: options.password,
  });
  return admin;
}

/** True when the admin client failed with the given HTTP status (e.g. 409 for "exists"). */
export function isHttpStatus(err: unknown, status: number): boolean {
  const response = (err as { response?: { status?: unknown } } | null)?.response;
  return response?.status === status;
}
