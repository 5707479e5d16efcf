import type { RequestHandler } from 'express';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { Cache } from '../cache/index.ts';
import type { ReplicaBus } from '../cache/replica-bus.ts';
import type { Config } from '../config/config.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import type { Audit } from '../http/audit.ts';
import type { KeycloakCalls } from '../keycloak/keycloak-calls.ts';
import type { KeycloakNodes } from '../keycloak/keycloak-nodes.ts';
import type { TokenClient } from '../keycloak/token-client.ts';
import { MASTER_REALM } from '../tenancy/identifiers.ts';
import type { OrganizationLookup, OrganizationState } from '../tenancy/organization-state.ts';
import type { Clock } from '../time/clock.ts';
import type { Tracing } from '../tracing/tracing.ts';
import type { AccountAdmin } from './account-admin.ts';
import { createAdmission, type Admission, type WorkspaceLookup } from './admission.ts';
import type { AuthMetrics } from './auth-metrics.ts';
import { createBasicAuthenticator } from './basic/basic-authenticator.ts';
import { isBootstrapAdmin } from './bootstrap-admin.ts';
import { longestServedSeconds } from './basic/cached-login.ts';
import {
  endBasicLoginsOnCredentialChanges,
  type KeycloakEventsSeen,
} from './basic/credential-changes.ts';
import { createActiveCheck } from './bearer/active-check.ts';
import { createBearerVerifier, type BearerVerifier } from './bearer/bearer-verifier.ts';
import { htuBaseOf } from './dpop/dpop-htu.ts';
import { createProofChecker } from './dpop/dpop-proof.ts';
import { createProofReplayStore } from './dpop/dpop-replay.ts';
import { createNonceSource } from './dpop/dpop-nonce.ts';
import { createDpopScheme } from './dpop/dpop-scheme.ts';
import { createDpopSwitches, type DpopSwitches } from './dpop/dpop-switch.ts';
import { createIdTokenReader, type IdTokenReader } from './bearer/id-token.ts';
import { createJwksRegistry, type JwksRegistry } from './bearer/jwks.ts';
import { createSessionTokenCheck, type SessionTokenCheck } from './bearer/session-token.ts';
import { createKeySetEvents, type KeySetEvents } from './bearer/key-set-events.ts';
import { createWorkerKeySetMemory } from './bearer/key-set-memory.ts';
import { createGoneRealms } from './gone-realms.ts';
import { createFailedLoginMemory, type FailedLoginMemory } from './failed-logins.ts';
import { createAccountLocks, type AccountLocks } from './account-locks.ts';
import { createLoginThrottle, type LoginThrottle } from './login-throttle.ts';
import { createLoginAccounts, type LoginAccounts } from './login-accounts.ts';
import { createReachStep, type ReachStep } from './reach.ts';
import { createRevocationList, type RevocationList } from './revocation.ts';
import { createTokenDetailsStore, type TokenDetailsStore } from './token-details.ts';
import type { IpcPeer } from '../cache/ipc-peer.ts';
import { resourceMetadataRouter, resourceMetadataUrlOf } from './resource-metadata.ts';

/** What the auth area gives the others: the admission and what the `/auth` steps and the platform share. */
export interface AuthArea {
  /** The one admission of `/api` requests, express routes and the forwarded route alike. */
  admission: Admission;
  bearer: BearerVerifier;
  jwks: JwksRegistry;
  idTokens: IdTokenReader;
  /** Whether a token a request carries was its realm's, of its session (the audit log's). */
  sessionTokens: SessionTokenCheck;
  revocations: RevocationList;
  keySetEvents: KeySetEvents;
  loginThrottle: LoginThrottle;
  failedLogins: FailedLoginMemory;
  /** Keycloak's lockouts of accounts told on refusals: Basic and the token endpoint read them. */
  accountLocks: AccountLocks;
  /** The account a login name names (its e-mail's user): what the two above count and keep. */
  loginAccounts: LoginAccounts;
  tokenDetails: TokenDetailsStore;
  reach: ReachStep;
  /** The longest a cached Basic login may be served: a user's revocation is remembered as long. */
  basicLoginSeconds: number;
  /**
   * A user was given a new password, or may now log in with one refused before (its lock
   * cleared, say): the failed-login memory drops what it keeps for the user (by id; the memory is
   * keyed by user name), and this process what it noted of the user's lock.
   */
  passwordSet(realm: string, userId: string): Promise<void>;
  /** Ends the cached Basic logins of users whose credentials Keycloak's events say changed. */
  keycloakEventsSeen: KeycloakEventsSeen;
  /** The protected-resource metadata of `/api` and each organization's (RFC 9728). */
  resourceMetadata: RequestHandler;
  /** The organizations' DPoP switches as the admission holds them and the metadata says. */
  dpopSwitches: DpopSwitches;
  /** Stops the key sets' schedules. */
  close(): void;
}

/**
 * The longest a password attempt can take, whichever way it came: Keycloak's answer to a grant,
 * and around it up to three of the gateway's own calls to Keycloak (for a grant through /auth:
 * the key set of the token it got, a job credential's look for whether the session holding its
 * name has ended (refusing that session's tokens within the same wait), and ending the session
 * of a token refused; for a Basic login: a key-set fetch and a two-factor lookup).
 */
export function passwordAttemptMaxMs(
  config: Pick<Config, 'AUTH_PROXY_TIMEOUT_MS' | 'KEYCLOAK_TIMEOUT_MS'>,
): number {
  return config.AUTH_PROXY_TIMEOUT_MS + 3 * config.KEYCLOAK_TIMEOUT_MS;
}

/** Builds the admission and everything it is made of, from the shared infrastructure. */
export async function buildAuth(
  shared: {
    config: Config;
    logger: Logger;
    clock: Clock;
    worker: { peer: IpcPeer } | undefined;
    db: Knex;
    cache: Cache;
    cacheSecret: string;
    bus: ReplicaBus | undefined;
    keycloakNodes: KeycloakNodes;
    metrics: AuthMetrics;
    tracing: Tracing | undefined;
    forwarding: Forwarding;
    audit: Audit;
  },
  keycloak: { calls: KeycloakCalls; tokens: TokenClient },
  /**
   * Whom the admission asks about organizations and workspaces (the platform's directory), and
   * the organization changes applied on this replica (made, enabled, disabled, deleted).
   */
  tenants: {
    directory: OrganizationLookup;
    workspaces: WorkspaceLookup;
    events: {
      onApplied(
        listener: (change: { organizationId: string; state: OrganizationState }) => void,
      ): void;
    };
  },
  accounts: Pick<
    AccountAdmin,
    'loginBlockOf' | 'dpopRequired' | 'usernameOf' | 'usernameOfEmail' | 'loginWithEmailAllowed'
  >,
): Promise<AuthArea> {
  const { config, logger, clock, cache, cacheSecret, metrics } = shared;
  const clientAddressOf = shared.forwarding.clientAddress.bind(shared.forwarding);
  // One memory of realms Keycloak said it does not have: the grant, the key set and the
  // re-check each answer from what any of them heard.
  const gone = createGoneRealms(clock);
  // An organization made (again), enabled or disabled through the gateway has its realm in
  // Keycloak, made or changed there just before: whatever Keycloak said of it, it is not gone.
  tenants.events.onApplied(({ organizationId, state }) => {
    if (state !== 'absent') gone.sawServed(organizationId);
  });
  // Master, or an organization that exists (disabled ones too: their logouts still count).
  const serves = async (realm: string, client: string | undefined) =>
    realm === MASTER_REALM || (await tenants.directory.stateOf(realm, client)) !== 'absent';
  // A worker's key sets include what its siblings fetched: each verifies through an outage.
  const jwks = createJwksRegistry({
    calls: keycloak.calls,
    refreshSeconds: config.KEY_SET_REFRESH_SECONDS,
    serves,
    memory: shared.worker ? createWorkerKeySetMemory(shared.worker.peer) : undefined,
    gone,
    logger,
    clock,
  });
  const revocations = await createRevocationList({
    bus: shared.bus,
    keyPrefix: config.REDIS_KEY_PREFIX,
    metrics,
    logger,
    clock,
  });
  const bearer = createBearerVerifier({
    jwks,
    publicUrl: config.PUBLIC_URL,
    leewaySeconds: config.TOKEN_CLOCK_LEEWAY_SECONDS,
    maxCachedTokens: config.MEMORY_CACHE_MAX_ENTRIES,
    lifetimes: revocations,
    metrics,
    clock,
  });
  const attemptMaxMs = passwordAttemptMaxMs(config);
  // The one throttle of password attempts: Basic logins here, password grants and the login
  // form on /auth (auth-proxy/auth-steps.ts).
  const loginThrottle = createLoginThrottle({
    cache,
    secret: cacheSecret,
    maxFailuresPerUserAndAddress: config.LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS,
    maxFailuresPerAddress: config.LOGIN_MAX_FAILURES_PER_ADDRESS,
    windowSeconds: config.LOGIN_FAILURE_WINDOW_SECONDS,
    // An attempt beyond the budget waits for those in flight as long as they may take: a right
    // login behind a slow Keycloak is answered, and still no more guesses are in flight.
    waitMs: attemptMaxMs,
    attemptMaxMs,
    clock,
    // The target names what is throttled (an IPv6 client's /64); the client, its own address.
    onLimitReached: ({ scope, realm, username, address, addressGroup }) =>
      shared.audit.record({
        action: 'login_throttle.start',
        outcome: 'success',
        target:
          scope === 'account_address'
            ? { scope, realm, username, address: addressGroup }
            : { scope, address: addressGroup },
        clientAddress: address,
      }),
  });
  // One memory of wrong passwords for Basic and the token endpoint, as long as the window.
  const failedLogins = createFailedLoginMemory({
    cache,
    secret: cacheSecret,
    windowSeconds: config.LOGIN_FAILURE_WINDOW_SECONDS,
    clock,
  });
  // One reading of what besides a password refused a login, for Basic and the token endpoint.
  const accountLocks = createAccountLocks({
    loginBlockOf: (realm, username) => accounts.loginBlockOf(realm, username),
    secret: cacheSecret,
    logger,
    clock,
  });
  // A user logging in by e-mail is the same account as by user name, to both of them.
  const loginAccounts = createLoginAccounts({
    cache,
    secret: cacheSecret,
    usernameOfEmail: (realm, email) => accounts.usernameOfEmail(realm, email),
    loginWithEmailAllowed: (realm) => accounts.loginWithEmailAllowed(realm),
    serves,
    throttle: loginThrottle,
    maxLocalEntries: config.MEMORY_CACHE_MAX_ENTRIES,
    logger,
    clock,
  });
  // A deleted organization's id may name a new one at once, with users named as the old ones.
  tenants.events.onApplied(({ organizationId, state }) => {
    if (state !== 'absent') return;
    loginAccounts.forgetRealm(organizationId).catch((err: unknown) => {
      logger.warn({ err }, "a deleted realm's login e-mails stay in the shared cache");
    });
  });
  const passwordSet = async (realm: string, userId: string) => {
    // A user deleted since has no failures worth dropping.
    const username = await accounts.usernameOf(realm, userId);
    if (!username) return;
    accountLocks.ended(realm, username);
    await failedLogins.passwordSet(realm, username);
  };
  const basicLoginSeconds = longestServedSeconds({
    cacheSeconds: config.BASIC_CACHE_MAX_SECONDS,
    outageSeconds: config.BASIC_OUTAGE_MAX_SECONDS,
  });
  const keycloakNodes = shared.keycloakNodes;
  const basic = createBasicAuthenticator({
    tokens: keycloak.tokens,
    bearer,
    cache,
    cacheSecret,
    maxCacheSeconds: config.BASIC_CACHE_MAX_SECONDS,
    maxOutageSeconds: config.BASIC_OUTAGE_MAX_SECONDS,
    keycloakDown: () => keycloakNodes.all.every((node) => node.state === 'down'),
    slowGrantPauseMs: config.AUTH_PROXY_TIMEOUT_MS,
    maxLocalEntries: config.MEMORY_CACHE_MAX_ENTRIES,
    failedLogins,
    accounts: loginAccounts,
    loginLockMs: attemptMaxMs,
    refuses: (realm, username) => isBootstrapAdmin(config.KEYCLOAK_ADMIN_USERNAME, realm, username),
    throttle: loginThrottle,
    revocations,
    locks: accountLocks,
    metrics,
    gone,
    logger,
    clock,
  });
  const activeCheck = createActiveCheck({
    tokens: keycloak.tokens,
    revocations,
    intervalSeconds: config.REVOCATION_CHECK_SECONDS,
    waitMs: config.REVOCATION_CHECK_WAIT_MS,
    basicCacheSeconds: basicLoginSeconds,
    metrics,
    gone,
    logger,
    clock,
  });
  const tokenDetails = createTokenDetailsStore(shared.db);
  const reach = createReachStep({
    store: tokenDetails,
    cache,
    clientAddressOf,
    maxEntries: config.MEMORY_CACHE_MAX_ENTRIES,
    clock,
    onUseFailed: (err) => logger.warn({ err }, 'could not write the last use of a refresh token'),
  });
  // A forced key-set refresh (an operator, or a key-provider change through an admin listener)
  // reaches every replica and worker.
  const keySetEvents = await createKeySetEvents({
    bus: shared.bus,
    keyPrefix: config.REDIS_KEY_PREFIX,
    jwks,
    logger,
  });
  const htuBase = htuBaseOf(config.PUBLIC_URL);
  // One memory of the organizations' DPoP switches: what the metadata says is what /api holds.
  const dpopSwitches = createDpopSwitches({
    read: (realm) => accounts.dpopRequired(realm),
    gone,
    shared: cache,
    // As long as a token's re-check: a switch never read is a check Keycloak must answer.
    waitMs: config.REVOCATION_CHECK_WAIT_MS,
    onUnread: (realm, err) =>
      logger.warn({ err, realm }, "could not read the realm's DPoP switch: unbound tokens served"),
    clock,
  });
  // A deleted organization's id may name a new one at once, its API client's switch off.
  tenants.events.onApplied(({ organizationId, state }) => {
    if (state === 'absent') dpopSwitches.forget(organizationId);
  });
  const admission = createAdmission({
    basic,
    bearer,
    // `Authorization: DPoP`: a bound token and its proof, each proof accepted once (dpop/).
    dpop: createDpopScheme({
      check: createProofChecker({
        algorithms: config.DPOP_ALGORITHMS,
        maxAgeSeconds: config.DPOP_PROOF_MAX_AGE_SECONDS,
        aheadSeconds: config.DPOP_PROOF_AHEAD_SECONDS,
        maxCachedKeys: config.MEMORY_CACHE_MAX_ENTRIES,
        clock,
      }),
      replay: createProofReplayStore({ cache, clock }),
      htuBase,
      algorithms: config.DPOP_ALGORITHMS,
      nonces: config.DPOP_NONCE
        ? createNonceSource({
            // config.ts requires REALMGATE_CACHE_SECRET with DPOP_NONCE (but in demo mode,
            // one process, whose random secret its workers share).
            secret: cacheSecret,
            slotSeconds: config.DPOP_PROOF_MAX_AGE_SECONDS,
            clock,
          })
        : undefined,
    }),
    resourceMetadataOf: (realm) => resourceMetadataUrlOf(htuBase, realm),
    dpopRequired: (realm) => dpopSwitches.heldIn(realm),
    revocations,
    activeCheck,
    organizations: tenants.directory,
    workspaces: tenants.workspaces,
    clientAddressOf,
    reach,
    metrics,
    tracing: shared.tracing,
  });
  return {
    admission,
    bearer,
    jwks,
    idTokens: createIdTokenReader({ jwks, publicUrl: config.PUBLIC_URL }),
    sessionTokens: createSessionTokenCheck({ jwks, publicUrl: config.PUBLIC_URL }),
    revocations,
    keySetEvents,
    loginThrottle,
    failedLogins,
    accountLocks,
    loginAccounts,
    tokenDetails,
    reach,
    basicLoginSeconds,
    passwordSet,
    keycloakEventsSeen: endBasicLoginsOnCredentialChanges({
      revocations,
      basicLoginSeconds,
      failureWindowSeconds: config.LOGIN_FAILURE_WINDOW_SECONDS,
      passwordSet,
      clock,
    }),
    dpopSwitches,
    resourceMetadata: resourceMetadataRouter({
      htuBase,
      algorithms: config.DPOP_ALGORITHMS,
      organizations: tenants.directory,
      clientAddressOf,
      switches: dpopSwitches,
    }),
    close: () => jwks.close(),
  };
}
