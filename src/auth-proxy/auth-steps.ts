import type { IncomingMessage } from 'node:http';
import express, { type RequestHandler, type Router } from 'express';
import type { Logger } from 'pino';
import { scopeOf } from '../edge/request-scope.ts';
import type { Forwarding } from '../edge/forwarding.ts';
import type { KeycloakNodes } from '../keycloak/keycloak-nodes.ts';
import type { AuthMetrics } from '../auth/auth-metrics.ts';
import type { SignedSessionReader } from '../auth/bearer/session-token.ts';
import type { ProxyMetrics } from '../outbound/proxy-failures.ts';
import type { AccountLocks } from '../auth/account-locks.ts';
import type { FailedLoginMemory } from '../auth/failed-logins.ts';
import type { LoginAccounts } from '../auth/login-accounts.ts';
import type { LoginThrottle } from '../auth/login-throttle.ts';
import { createAuthProxy, refuseAdminArea } from './auth-proxy.ts';
import { AUTH_ROUTES, authEntryOf, type AuthRoute, type AuthStep } from './auth-routes.ts';
import { guardBootstrapAdmin } from './bootstrap-admin-guard.ts';
import { rewriteConsolePage, rewriteLoginPage } from './console-page.ts';
import { guardDpopProofKey } from './dpop-proof-key-guard.ts';
import { endAccessOnSuccess, type EndAccessDeps } from './end-access.ts';
import { guardFormBody } from './form-body-guard.ts';
import type { IdenticalGrants } from './identical-grants.ts';
import { jobCredentials, type JobCredentialsDeps } from './job-credentials.ts';
import { refuseUnreadBodies, throttlePasswordAttempts } from './password-attempt-throttle.ts';
import { rewritePages } from './rewrite-page.ts';
import { guardTokenReach, type TokenReachRefusalListener } from './token-reach-guard.ts';
import { answerWrongCredentials401 } from './wrong-credentials.ts';

export type Listener = 'public' | 'admin';

/** What the `/auth` mount is built from. */
export interface AuthMountDeps {
  logger: Logger;
  /** Keycloak's nodes (one or several), shared with the gateway's own calls. */
  keycloakNodes: KeycloakNodes;
  publicUrl: string;
  /** `ADMIN_PUBLIC_URL`: where the admin listener's console pages are served. */
  adminUrl: string;
  authProxyTimeoutMs: number;
  /** `PROXY_ANSWER_DEADLINE_SECONDS` in ms: how long Keycloak's answer may go on once it lasts. */
  answerDeadlineMs: number;
  forwarding: Forwarding;
  /** Keycloak's bootstrap administrator: never tried on the public listener. */
  bootstrapAdmin: string;
  /** `DPOP_ALGORITHMS`: the algorithms a DPoP proof may use, on `/api` and so at the token endpoint. */
  dpopAlgorithms: readonly string[];
  /** Counts password attempts on `/auth` as it counts Basic logins on the API. */
  loginThrottle: LoginThrottle;
  /** Wrong passwords refused within the throttle's window, shared with Basic. */
  failedLogins: FailedLoginMemory;
  /** Keycloak's lockouts of accounts, shared with Basic. */
  accountLocks: AccountLocks;
  /** The account a login name names (by e-mail too), as the two above key it. */
  loginAccounts: LoginAccounts;
  /** The password grants in flight: one set per process, whichever listener they came to. */
  identicalGrants: IdenticalGrants;
  metrics: Pick<AuthMetrics, 'authFailure'> & ProxyMetrics;
  /** Applies what logouts, revocations and admin-API changes end in Keycloak (end-access.ts). */
  endAccess: EndAccessDeps;
  /**
   * Names, reaches and lifetimes given at issuance, on the token endpoint (job-credentials.ts),
   * and the reach of a token on any call (token-reach-guard.ts).
   */
  jobCredentials: JobCredentialsDeps;
  /**
   * The session of an access token its realm signed (session-token.ts): only such a token's
   * reach is looked up (token-reach-guard.ts).
   */
  signedSession: SignedSessionReader;
  /** What records `/auth` in the audit log (the audit area's). */
  audit: AuthAudit;
}

/** What records `/auth` requests in the audit log; each undefined when the log is off. */
export interface AuthAudit {
  /** The token endpoint's step recording each grant. */
  grants: RequestHandler | undefined;
  /** Told of each request the reach step refuses (a grant's refusal is in its grant's record). */
  reachRefusals: TokenReachRefusalListener | undefined;
}

/**
 * One step of the table: on the entries that name it (`step`), or on every `/auth` request
 * (`everyRequest`); its handlers on a listener, none where it does nothing there.
 */
interface AuthStepOfTable {
  readonly step: AuthStep | 'everyRequest';
  readonly build: (deps: AuthMountDeps, listener: Listener) => RequestHandler[];
}

const on = (step: AuthStepOfTable['step'], build: AuthStepOfTable['build']): AuthStepOfTable => ({
  step,
  build,
});
const onlyOn =
  (only: Listener, build: AuthStepOfTable['build']): AuthStepOfTable['build'] =>
  (deps, listener) =>
    listener === only ? build(deps, listener) : [];

/**
 * The steps of the `/auth` mount, in the order they run; a request gets those its entry names
 * (auth-routes.ts), then the proxy to Keycloak. A new step is one entry here and its name on
 * the entries it serves.
 */
export const AUTH_STEPS: readonly AuthStepOfTable[] = [
  // Before any body is read: the admin area is not there on the public listener.
  on(
    'adminListener',
    onlyOn('public', () => [refuseAdminArea]),
  ),
  // Before the form is read: a grant any later step refuses, the form's reader included, is
  // recorded too (with the fields of its form once read, none of a form the reader refused).
  on('auditGrant', (deps) => (deps.audit.grants ? [deps.audit.grants] : [])),
  // The one reader of `/auth` bodies (forms, for the steps below and a resend to another node).
  on('everyRequest', () => guardFormBody()),
  // Before any step acts on a request its token's reach refuses (endAccess above all).
  on('tokenReach', (deps) => [
    guardTokenReach({
      ...deps.jobCredentials,
      signedSession: deps.signedSession,
      clientAddress: (req) => deps.forwarding.clientAddress(req),
      refused: deps.audit.reachRefusals,
    }),
  ]),
  on(
    'bootstrapAdmin',
    onlyOn('public', (deps) => [
      guardBootstrapAdmin({
        bootstrapAdmin: deps.bootstrapAdmin,
        accounts: deps.loginAccounts,
        clientAddress: (req) => deps.forwarding.clientAddress(req),
        metrics: deps.metrics,
        logger: deps.logger,
      }),
    ]),
  ),
  on('dpopProofKey', (deps) => [guardDpopProofKey(deps.dpopAlgorithms)]),
  on('jobCredentials', (deps) => [jobCredentials(deps.jobCredentials)]),
  on('passwordGrant', (deps) => [
    refuseUnreadBodies('grant', deps.logger),
    throttlePasswordAttempts(throttleDepsOf(deps), 'grant', deps.identicalGrants),
    answerWrongCredentials401,
  ]),
  on('passwordForm', (deps) => [
    refuseUnreadBodies('form', deps.logger),
    throttlePasswordAttempts(throttleDepsOf(deps), 'form', deps.identicalGrants),
  ]),
  on('registrationForm', (deps) => [refuseUnreadBodies('form', deps.logger)]),
  on('endAccess', (deps) => [endAccessOnSuccess(deps.endAccess)]),
  on(
    'consolePage',
    onlyOn('admin', (deps) => [rewritePages(['GET'], rewriteConsolePage(deps))]),
  ),
  on(
    'loginPage',
    onlyOn('admin', (deps) => [rewritePages(['GET', 'POST'], rewriteLoginPage(deps))]),
  ),
];

function throttleDepsOf(deps: AuthMountDeps) {
  return {
    throttle: deps.loginThrottle,
    failedLogins: deps.failedLogins,
    locks: deps.accountLocks,
    accounts: deps.loginAccounts,
    clientAddress: (req: IncomingMessage) => deps.forwarding.clientAddress(req),
    metrics: deps.metrics,
    logger: deps.logger,
  };
}

/** The names of the steps a request of `entry` (none: a path outside both areas) runs through. */
export function stepsOf(entry: AuthRoute | undefined): AuthStepOfTable['step'][] {
  return AUTH_STEPS.filter((s) => s.step === 'everyRequest' || entry?.steps.includes(s.step)).map(
    (s) => s.step,
  );
}

/**
 * The `/auth` mount of one listener: for each entry of the table, a router of the steps it
 * names (built once, at start), then the proxy. A request runs through its entry's router.
 */
export function createAuthMount(deps: AuthMountDeps, listener: Listener): RequestHandler {
  const built = AUTH_STEPS.map((s) => ({ step: s.step, handlers: s.build(deps, listener) }));
  const routerOf = (entry: AuthRoute | undefined): Router => {
    const router = express.Router();
    for (const { step, handlers } of built) {
      if (handlers.length > 0 && (step === 'everyRequest' || entry?.steps.includes(step))) {
        router.use(handlers);
      }
    }
    return router;
  };
  const routers = new Map<AuthRoute | undefined, Router>([
    [undefined, routerOf(undefined)],
    ...AUTH_ROUTES.map((entry): [AuthRoute, Router] => [entry, routerOf(entry)]),
  ]);
  const proxy = createAuthProxy({
    nodes: deps.keycloakNodes,
    publicUrl: deps.publicUrl,
    timeoutMs: deps.authProxyTimeoutMs,
    answerDeadlineMs: deps.answerDeadlineMs,
    forwarding: deps.forwarding,
    metrics: deps.metrics,
    logger: deps.logger,
  });
  return (req, res, next) => {
    const router = routers.get(authEntryOf(scopeOf(req).route))!;
    router(req, res, (err?: unknown) => (err ? next(err) : proxy(req, res, next)));
  };
}
