import type { IncomingMessage } from 'node:http';
import type { RequestHandler } from 'express';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { AccountAdmin } from '../auth/account-admin.ts';
import { passwordAttemptMaxMs, type AuthArea } from '../auth/auth.area.ts';
import type { AuthMetrics } from '../auth/auth-metrics.ts';
import type { ProxyMetrics } from '../outbound/proxy-failures.ts';
import type { Config } from '../config/config.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import type { KeycloakNodes } from '../keycloak/keycloak-nodes.ts';
import type { Clock } from '../time/clock.ts';
import { createLogoutTokenVerifier } from '../auth/bearer/logout-token.ts';
import { createSignedSessionReader } from '../auth/bearer/session-token.ts';
import type { Cache } from '../cache/cache.ts';
import type { Audit } from '../http/audit.ts';
import type { RoleRef } from './access-endings.ts';
import { createAccessRevocations, type RefuseEndedSessions } from './access-revocations.ts';
import { createAdminCallerCheck } from './admin-caller.ts';
import { createAuthMount, type AuthAudit, type Listener } from './auth-steps.ts';
import { createIdenticalGrants } from './identical-grants.ts';
import { createTokenBindingStore, type TokenBindingStore } from './token-bindings.ts';
import {
  backchannelClientsOf,
  backchannelLogout,
  type BackchannelMetrics,
  LOGOUT_TOKEN_MAX_AGE_SECONDS,
} from './backchannel-logout.ts';

/** What the auth-proxy area serves. */
export interface AuthProxyArea {
  /** The `/auth` mount of a listener: its steps, then the proxy (auth-steps.ts). */
  mount: (listener: Listener) => RequestHandler;
  /** `POST /backchannel-logout`, the admin listener's (backchannel-logout.ts). */
  backchannelLogout: RequestHandler;
  /** The key each password grant's new session is bound to (DPoP), for the refresh-token list. */
  tokenBindings: TokenBindingStore;
  /**
   * Refuses at once the tokens of sessions Keycloak ended, sized as every ending of `/auth` is
   * (`AccessRevocations.endSessions`): the refresh-token list's, for the records it drops.
   */
  refuseEnded: RefuseEndedSessions;
}

/**
 * Builds the `/auth` route (its steps' dependencies once, the mount of each listener from them)
 * and the back-channel logout endpoint: both end access through one set of revocations.
 */
export function buildAuthProxy(
  shared: {
    config: Config;
    logger: Logger;
    db: Knex;
    clock: Clock;
    keycloakNodes: KeycloakNodes;
    forwarding: Forwarding;
    cache: Cache;
    audit: Audit;
    metrics: Pick<AuthMetrics, 'authFailure'> & BackchannelMetrics & ProxyMetrics;
  },
  auth: Pick<
    AuthArea,
    | 'bearer'
    | 'jwks'
    | 'idTokens'
    | 'revocations'
    | 'keySetEvents'
    | 'loginThrottle'
    | 'failedLogins'
    | 'accountLocks'
    | 'loginAccounts'
    | 'tokenDetails'
    | 'reach'
    | 'basicLoginSeconds'
    | 'passwordSet'
  >,
  accounts: AccountAdmin,
  /**
   * The audit log's (src/audit/), when it is on: the step recording each token grant, and what
   * records each refusal of the reach step on other `/auth` paths.
   */
  audit: AuthAudit,
): AuthProxyArea {
  const { config, logger, clock } = shared;
  // The revocations of a session or a user: what passes through /auth, what Keycloak announces.
  const access = createAccessRevocations({
    revocations: auth.revocations,
    accessTokenSeconds: (realm: string) => accounts.longestAccessTokenSeconds(realm),
    leewaySeconds: config.TOKEN_CLOCK_LEEWAY_SECONDS,
    basicCacheSeconds: auth.basicLoginSeconds,
    logger,
  });
  const tokenBindings = createTokenBindingStore(shared.db);
  const refuseEnded: RefuseEndedSessions = async (realm, sessionIds, userId, waitMs) => {
    const refuse = await access.endSessions(realm, sessionIds, userId, waitMs);
    await refuse();
  };
  const deps = {
    logger,
    keycloakNodes: shared.keycloakNodes,
    publicUrl: config.PUBLIC_URL,
    adminUrl: config.ADMIN_PUBLIC_URL,
    authProxyTimeoutMs: config.AUTH_PROXY_TIMEOUT_MS,
    answerDeadlineMs: config.PROXY_ANSWER_DEADLINE_SECONDS * 1000,
    forwarding: shared.forwarding,
    bootstrapAdmin: config.KEYCLOAK_ADMIN_USERNAME,
    dpopAlgorithms: config.DPOP_ALGORITHMS,
    loginThrottle: auth.loginThrottle,
    failedLogins: auth.failedLogins,
    accountLocks: auth.accountLocks,
    loginAccounts: auth.loginAccounts,
    // Here, built once: each listener's mount waits on the same grants in flight.
    identicalGrants: createIdenticalGrants({
      // As long as one grant may take (the throttle's wait for the attempts in flight).
      maxWaitMs: passwordAttemptMaxMs(config),
    }),
    metrics: shared.metrics,
    // What passes through the mount (logouts, revocations, the admin API's account and key
    // changes) ends at the gateway when Keycloak says yes.
    endAccess: {
      revocations: auth.revocations,
      bearer: auth.bearer,
      idTokenSession: auth.idTokens,
      clientAddress: (req: IncomingMessage) => shared.forwarding.clientAddress(req),
      mayBeAdmitted: createAdminCallerCheck(auth.jwks),
      access,
      groupMembers: (realm: string, groupId: string) => accounts.groupMembers(realm, groupId),
      roleOf: (realm: string, role: RoleRef) => accounts.roleOf(realm, role),
      clientRolesOf: (realm: string, clientUuid: string) =>
        accounts.clientRolesOf(realm, clientUuid),
      leewaySeconds: config.TOKEN_CLOCK_LEEWAY_SECONDS,
      onKeyProvidersChanged: (realm: string) => auth.keySetEvents.refreshEverywhere(realm),
      onPasswordSet: auth.passwordSet,
      logger,
      clock,
    },
    signedSession: createSignedSessionReader({ jwks: auth.jwks, publicUrl: config.PUBLIC_URL }),
    jobCredentials: {
      store: auth.tokenDetails,
      bindings: tokenBindings,
      reach: auth.reach,
      bearer: auth.bearer,
      endSession: (realm: string, sessionId: string) =>
        accounts.endOfflineSession(realm, sessionId),
      endedSessions: (realm: string, userId: string, sessionIds: readonly string[]) =>
        accounts.endedSessions(realm, userId, sessionIds),
      refuseEnded,
      lookupMs: config.KEYCLOAK_TIMEOUT_MS,
      logger,
      clock,
    },
    audit,
  };
  return {
    mount: (listener) => createAuthMount(deps, listener),
    tokenBindings,
    refuseEnded,
    // What Keycloak announces it ended (OpenID Connect back-channel logout).
    backchannelLogout: backchannelLogout({
      verify: createLogoutTokenVerifier({
        jwks: auth.jwks,
        publicUrl: config.PUBLIC_URL,
        audiencesOf: backchannelClientsOf,
        maxAgeSeconds: LOGOUT_TOKEN_MAX_AGE_SECONDS,
        leewaySeconds: config.TOKEN_CLOCK_LEEWAY_SECONDS,
        clock,
      }),
      access,
      cache: shared.cache,
      replayWindowSeconds: LOGOUT_TOKEN_MAX_AGE_SECONDS + 2 * config.TOKEN_CLOCK_LEEWAY_SECONDS,
      metrics: shared.metrics,
      audit: shared.audit,
      clientAddress: (req) => shared.forwarding.clientAddress(req),
      logger,
      clock,
    }),
  };
}
