import type { Config } from '../config/config.ts';
import type { Clock } from '../time/clock.ts';
import type { Tracing } from '../tracing/tracing.ts';
import { createAdminSession, type AdminSession } from './admin-session.ts';
import {
  createKeycloakCalls,
  type KeycloakCallObserver,
  type KeycloakCalls,
} from './keycloak-calls.ts';
import type { KeycloakNodes } from './keycloak-nodes.ts';
import { createServiceAdmin, type ServiceAdmin } from './service-admin.ts';
import { createTokenClient, type TokenClient } from './token-client.ts';

/** The gateway's own ways to Keycloak, for the areas that call it. */
export interface KeycloakArea {
  /** The one client layer (grants, introspection, key sets, admin API) and its failures. */
  calls: KeycloakCalls;
  /** The gateway's own client's admin sessions, one per realm (its service account). */
  serviceAdmin: ServiceAdmin;
  /** Password grants (Basic logins) and introspection. */
  tokens: TokenClient;
  /** The bootstrap administrator's session: provisioning and the platform's admin calls. */
  adminSession: AdminSession;
}

/** Builds the Keycloak client layer over the nodes the infrastructure watches. */
export function buildKeycloak(shared: {
  config: Config;
  keycloakNodes: KeycloakNodes;
  /** Counts every call (when metrics are on). */
  metrics: { keycloakCall: NonNullable<KeycloakCallObserver['onCall']> };
  tracing: Tracing | undefined;
  clock: Clock;
}): KeycloakArea {
  const { config, clock } = shared;
  const calls = createKeycloakCalls({
    nodes: shared.keycloakNodes,
    timeoutMs: config.KEYCLOAK_TIMEOUT_MS,
    grantTimeoutMs: config.AUTH_PROXY_TIMEOUT_MS,
    observer: config.METRICS_ENABLED
      ? { onCall: (kind, outcome, seconds) => shared.metrics.keycloakCall(kind, outcome, seconds) }
      : undefined,
    tracing: shared.tracing,
  });
  const clientSecret = config.KEYCLOAK_CLIENT_SECRET ?? '';
  return {
    calls,
    serviceAdmin: createServiceAdmin({ calls, clientSecret }),
    tokens: createTokenClient({
      calls,
      gatewayClientSecret: clientSecret,
      publicUrl: config.PUBLIC_URL,
    }),
    adminSession: createAdminSession({
      calls,
      username: config.KEYCLOAK_ADMIN_USERNAME,
      password: config.KEYCLOAK_ADMIN_PASSWORD ?? '',
      clock,
    }),
  };
}
