import type { RequestHandler } from 'express';
import type { Logger } from 'pino';
import type { AccountAdmin } from '../auth/account-admin.ts';
import type { AuthArea } from '../auth/auth.area.ts';
import type { AuthMetrics } from '../auth/auth-metrics.ts';
import type { Config } from '../config/config.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import type { KeycloakNodes } from '../keycloak/keycloak-nodes.ts';
import type { Clock } from '../time/clock.ts';
import { createAuthMount, type Listener } from './auth-steps.ts';

/**
 * Builds the `/auth` route: its steps' dependencies once, and the mount of each listener
 * (auth-steps.ts) from them.
 */
export function buildAuthProxy(
  shared: {
    config: Config;
    logger: Logger;
    clock: Clock;
    keycloakNodes: KeycloakNodes;
    forwarding: Forwarding;
    metrics: Pick<AuthMetrics, 'authFailure'>;
  },
  auth: Pick<
    AuthArea,
    | 'bearer'
    | 'idTokens'
    | 'revocations'
    | 'keySetEvents'
    | 'loginThrottle'
    | 'failedLogins'
    | 'tokenDetails'
    | 'reach'
    | 'basicLoginSeconds'
  >,
  accounts: AccountAdmin,
): (listener: Listener) => RequestHandler {
  const { config, logger, clock } = shared;
  const deps = {
    logger,
    keycloakNodes: shared.keycloakNodes,
    publicUrl: config.PUBLIC_URL,
    adminUrl: config.ADMIN_PUBLIC_URL,
    authProxyTimeoutMs: config.AUTH_PROXY_TIMEOUT_MS,
    forwarding: shared.forwarding,
    bootstrapAdmin: config.KEYCLOAK_ADMIN_USERNAME,
    loginThrottle: auth.loginThrottle,
    failedLogins: auth.failedLogins,
    metrics: shared.metrics,
    // What passes through the mount (logouts, revocations, the admin API's account and key
    // changes) ends at the gateway when Keycloak says yes.
    endAccess: {
      revocations: auth.revocations,
      bearer: auth.bearer,
      idTokenSession: auth.idTokens,
      accessTokenSeconds: (realm: string) => accounts.longestAccessTokenSeconds(realm),
      leewaySeconds: config.TOKEN_CLOCK_LEEWAY_SECONDS,
      basicCacheSeconds: auth.basicLoginSeconds,
      onKeyProvidersChanged: (realm: string) => auth.keySetEvents.refreshEverywhere(realm),
      // The throttle's memory is keyed by user name; the admin API names the user by id.
      onPasswordSet: async (realm: string, userId: string) => {
        const username = await accounts.usernameOf(realm, userId);
        if (username) await auth.failedLogins.passwordSet(realm, username);
      },
      logger,
      clock,
    },
    jobCredentials: {
      store: auth.tokenDetails,
      reach: auth.reach,
      bearer: auth.bearer,
      endSession: (realm: string, sessionId: string) =>
        accounts.endOfflineSession(realm, sessionId),
      logger,
      clock,
    },
  };
  return (listener) => createAuthMount(deps, listener);
}
