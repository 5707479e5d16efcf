import type { IncomingMessage } from 'node:http';
import { scopeOf } from '../edge/request-scope.ts';
import type { Route, RouteDeclaration } from '../edge/route.ts';
import {
  ENDING_RULES,
  matchedEnding,
  type EndingRule,
  type MatchedEnding,
} from './access-endings.ts';

/**
 * What the `/auth` mount does for a path beyond proxying it: each entry names its steps, and the
 * mount runs exactly those, in the order of its one table (auth-steps.ts `AUTH_STEPS`, where
 * each step's file is named); no step asks whether it applies.
 * - `adminListener`: served on the admin listener only, 404 on the public one;
 * - `bootstrapAdmin`: a form sent to the master realm may not name Keycloak's bootstrap
 *   administrator, on the public listener;
 * - `auditGrant`: a POST is recorded in the audit log once answered (src/audit/token-grants.ts);
 * - `tokenReach`: a call carrying a job credential's token is held to its reach (its Account API
 *   and admin API calls, as its `/api` calls: token-reach-guard.ts);
 * - `dpopProofKey`: a DPoP proof whose `alg` or key the `/api` check would refuse is refused
 *   before Keycloak binds a token to its key;
 * - `jobCredentials`: a POST's job-credential fields and refresh lifetimes;
 * - `passwordGrant`: a POST's password grant passes the login throttle, a body the form guard
 *   could not read is refused, and Keycloak's refusal of its credentials answers 401;
 * - `passwordForm`: a POST to Keycloak's login pages that carries a password, one-time
 *   password or recovery code passes the login throttle, and one whose body the form guard
 *   could not read is refused;
 * - `registrationForm`: a POST to Keycloak's registration page whose body the form guard could
 *   not read is refused; its password is chosen there, never checked: no attempt to count;
 * - `endAccess`: what the request ends once Keycloak answers success (the entry's `ending`);
 * - `consolePage`, `loginPage`: the admin listener rewrites the console page on a GET, the login
 *   pages on a GET or POST;
 * - `consoleHome`: no step of the mount; the edge sends it to the console's canonical address
 *   (console-page.ts, edge/canonical-host.ts), as it does `consolePage`.
 */
export const AUTH_STEP_NAMES = [
  'adminListener',
  'bootstrapAdmin',
  'auditGrant',
  'tokenReach',
  'dpopProofKey',
  'jobCredentials',
  'passwordGrant',
  'passwordForm',
  'registrationForm',
  'endAccess',
  'consoleHome',
  'consolePage',
  'loginPage',
] as const;
export type AuthStep = (typeof AUTH_STEP_NAMES)[number];

/** An entry of the `/auth` route table: its path, how it is served, and what applies to it. */
export interface AuthRoute extends RouteDeclaration {
  readonly steps: readonly AuthStep[];
  /** What a request to it ends once Keycloak answers success (access-endings.ts, end-access.ts). */
  readonly ending?: EndingRule;
}

/** Below `/auth/admin/`: Keycloak's console and admin API. */
const ADMIN_STEPS: readonly AuthStep[] = ['adminListener', 'tokenReach'];
/**
 * Below `/auth/realms/{realm}/`: what a realm's users reach (its login, its OpenID endpoints,
 * its Account API).
 */
const REALM_STEPS: readonly AuthStep[] = ['bootstrapAdmin', 'tokenReach'];
const REALM = '/auth/realms/{realm}';
const OIDC = `${REALM}/protocol/openid-connect`;

const entry = (
  path: string,
  method: AuthRoute['method'],
  steps: readonly AuthStep[],
  more: Partial<AuthRoute> = {},
): AuthRoute => ({ path, method, steps, metricsClass: 'other', ...more });
const below = (path: string, steps: readonly AuthStep[], more: Partial<AuthRoute> = {}) =>
  entry(path, 'any', steps, { below: true, ...more });

/** Where logins and refreshes go. */
export const TOKEN_ROUTE = entry(
  `${OIDC}/token`,
  'any',
  ['auditGrant', ...REALM_STEPS, 'dpopProofKey', 'jobCredentials', 'passwordGrant'],
  { metricsClass: 'token' },
);

/** The ending rules of access-endings.ts, an entry per method; their steps by their area. */
function endingRoutes(): AuthRoute[] {
  return ENDING_RULES.flatMap((rule) =>
    rule.methods.map((method) =>
      entry(
        rule.path,
        method,
        [...(rule.path.startsWith('/auth/admin/') ? ADMIN_STEPS : REALM_STEPS), 'endAccess'],
        { ending: rule },
      ),
    ),
  );
}

/**
 * Every `/auth` path the gateway does anything about but proxy it, declared once: the edge's
 * reader of paths is compiled from these (edge/route.ts, with the `/api` tables), and each step
 * of the `/auth` mount reads the entry the edge matched (authRouteOf). Every path below
 * `/auth/admin` (however cased) and below `/auth/realms/{realm}` has an entry: the fallbacks
 * (`below`) serve what no closer entry does, so a step of the whole area is on every entry of it.
 * An `/auth` path outside both areas has no entry: it is proxied with no step.
 */
export const AUTH_ROUTES: readonly AuthRoute[] = [
  below('/auth/admin', ADMIN_STEPS, { caseless: true }),
  entry('/auth/admin', 'get', [...ADMIN_STEPS, 'consoleHome']),
  entry('/auth/admin/{realm}/console', 'get', [...ADMIN_STEPS, 'consolePage']),
  below(REALM, REALM_STEPS),
  TOKEN_ROUTE,
  below(`${OIDC}/auth`, [...REALM_STEPS, 'loginPage']),
  // Keycloak's login pages: any of them may post a password or one-time password (the login
  // form, identity-first login's password page, re-authentication in a broker's first login, a
  // reset's one-time password), and each may carry a user name for the bootstrap guard.
  below(`${REALM}/login-actions`, [...REALM_STEPS, 'loginPage', 'passwordForm']),
  // Self-registration: a refused one (a name taken, a confirmation mistyped) is no failed login.
  entry(`${REALM}/login-actions/registration`, 'any', [
    ...REALM_STEPS,
    'loginPage',
    'registrationForm',
  ]),
  ...endingRoutes(),
];

const ENTRIES: ReadonlySet<RouteDeclaration> = new Set(AUTH_ROUTES);

/** The `/auth` entry of a route the edge read, if it has one. */
export function authEntryOf(route: Route): AuthRoute | undefined {
  const { entry } = route;
  return entry !== undefined && ENTRIES.has(entry) ? (entry as AuthRoute) : undefined;
}

/** The realm the path of `req` names, as the edge read it (its entry's `{realm}`). */
export function realmOf(req: IncomingMessage): string | undefined {
  return scopeOf(req).route.realm;
}

/** Whether `req` is for a realm's required-action page (`login-actions/required-action`). */
export function isRequiredActionPage(req: IncomingMessage): boolean {
  const [, , , area, page] = scopeOf(req).target.segments;
  return area === 'login-actions' && page === 'required-action';
}

/** What the request ends once Keycloak answers success, if its entry carries an ending rule. */
export function endingOf(route: Route): MatchedEnding | undefined {
  const rule = authEntryOf(route)?.ending;
  return rule && matchedEnding(rule, route.params);
}
