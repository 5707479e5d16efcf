import KcAdminClient from '@keycloak/keycloak-admin-client';
import { createKeycloakCalls, type KeycloakCalls } from './keycloak-calls.ts';

export type KeycloakAdmin = KcAdminClient;

/** Resource members that build requests when the client is constructed, not requests. */
const NOT_REQUESTS = new Set(['makeRequest', 'makeUpdateRequest']);

/**
 * An admin-API client of `realmName` whose every request (and login) runs through the client
 * layer: timed out after the layer's `timeoutMs`, counted by its observer, and failing with the
 * layer's 503/504/502; Keycloak's 4xx answers pass through (see `isHttpStatus`).
 */
export function createAdminClient(calls: KeycloakCalls, realmName: string): KeycloakAdmin {
  const client = new KcAdminClient({
    baseUrl: calls.keycloakUrl,
    realmName,
    timeout: calls.timeoutMs,
  });
  // Each resource (users, clients, realms, ...) holds its requests as own function members.
  for (const resource of Object.values(client) as unknown[]) {
    if (typeof resource !== 'object' || resource === null) continue;
    const members = resource as Record<string, unknown>;
    for (const [name, member] of Object.entries(members)) {
      if (typeof member !== 'function' || NOT_REQUESTS.has(name)) continue;
      const send = member as (...args: unknown[]) => Promise<unknown>;
      members[name] = (...args: unknown[]) => calls.admin(() => send.apply(resource, args));
    }
  }
  const auth = client.auth.bind(client);
  client.auth = (credentials) => calls.admin(() => auth(credentials));
  return client;
}

/**
 * An admin-API client logged in as Keycloak's bootstrap administrator (master realm,
 * `admin-cli`). Used for provisioning realms and users, never on the request path.
 */
export async function loginAsBootstrapAdmin(options: {
  keycloakUrl: string;
  username: string;
  password: string;
  timeoutMs: number;
  /** The gateway's client layer; without it, one of its own (no observer). */
  calls?: KeycloakCalls;
}): Promise<KeycloakAdmin> {
  const calls = options.calls ?? createKeycloakCalls(options);
  const admin = createAdminClient(calls, 'master');
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
  return httpStatusOf(err) === status;
}

/** The HTTP status of Keycloak's answer an admin-client call failed with, if it got one. */
export function httpStatusOf(err: unknown): number | undefined {
  const status = (err as { response?: { status?: unknown } } | null)?.response?.status;
  return typeof status === 'number' ? status : undefined;
}
