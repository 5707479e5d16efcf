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
 * What the `/auth` mount does for a path beyond proxying it, each step keyed by the entries
 * that carry it (the steps themselves live in their own files):
 * - `adminListener`: served on the admin listener only, 404 on the public one (auth-proxy.ts);
 * - `bootstrapAdmin`: a form sent to the master realm may not name Keycloak's bootstrap
 *   administrator, on the public listener (bootstrap-admin-guard.ts);
 * - `jobCredentials`: a POST's job-credential fields and refresh lifetimes (job-credentials.ts);
 * - `passwordGrant`: a POST's password grant passes the login throttle, and a body the form guard
 *   could not read is refused (password-attempt-throttle.ts); Keycloak's refusal of its
 *   credentials answers 401 (wrong-credentials.ts);
 * - `passwordForm`: Keycloak's login form passes the login throttle (password-attempt-throttle.ts);
 * - `consoleHome`, `consolePage`: the admin console, its canonical address
 *   (console-page.ts, edge/canonical-host.ts), and its page rewritten on a GET;
 * - `loginPage`: Keycloak's login pages, rewritten on a GET or POST on the admin listener.
 */
export type AuthStep =
  | 'adminListener'
  | 'bootstrapAdmin'
  | 'jobCredentials'
  | 'passwordGrant'
  | 'passwordForm'
  | 'consoleHome'
  | 'consolePage'
  | 'loginPage';

/** An entry of the `/auth` route table: its path, how it is served, and what applies to it. */
export interface AuthRoute extends RouteDeclaration {
  readonly steps: readonly AuthStep[];
  /** What a request to it ends once Keycloak answers success (access-endings.ts, end-access.ts). */
  readonly ending?: EndingRule;
}

/** Below `/auth/admin/`: Keycloak's console and admin API. */
const ADMIN_STEPS: readonly AuthStep[] = ['adminListener'];
/** Below `/auth/realms/{realm}/`: what a realm's users reach (its login, its OpenID endpoints). */
const REALM_STEPS: readonly AuthStep[] = ['bootstrapAdmin'];
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
  [...REALM_STEPS, 'jobCredentials', 'passwordGrant'],
  { metricsClass: 'token' },
);

/** The ending rules of access-endings.ts, an entry per method; their steps by their area. */
function endingRoutes(): AuthRoute[] {
  return ENDING_RULES.flatMap((rule) =>
    rule.methods.map((method) =>
      entry(rule.path, method, rule.path.startsWith('/auth/admin/') ? ADMIN_STEPS : REALM_STEPS, {
        ending: rule,
      }),
    ),
  );
}

/**
 * Every `/auth` path the gateway does anything about but proxy it, declared once: the edge's
 * reader of paths is compiled from these (edge/route.ts, with the `/api` tables), and each step
 * of the `/auth` mount reads the entry the edge matched (authRouteOf). Every path below
 * `/auth/admin` (however cased) and below `/auth/realms/{realm}` has an entry: the fallbacks
 * (`below`) serve what no closer entry does, so a step of the whole area is on every entry of it.
 */
export const AUTH_ROUTES: readonly AuthRoute[] = [
  below('/auth/admin', ADMIN_STEPS, { caseless: true }),
  entry('/auth/admin', 'get', [...ADMIN_STEPS, 'consoleHome']),
  entry('/auth/admin/{realm}/console', 'get', [...ADMIN_STEPS, 'consolePage']),
  below(REALM, REALM_STEPS),
  TOKEN_ROUTE,
  below(`${OIDC}/auth`, [...REALM_STEPS, 'loginPage']),
  below(`${REALM}/login-actions`, [...REALM_STEPS, 'loginPage']),
  entry(`${REALM}/login-actions/authenticate`, 'post', [
    ...REALM_STEPS,
    'loginPage',
    'passwordForm',
  ]),
  ...endingRoutes(),
];

const ENTRIES: ReadonlySet<RouteDeclaration> = new Set(AUTH_ROUTES);

/** The `/auth` entry of a route the edge read, if it has one. */
export function authEntryOf(route: Route): AuthRoute | undefined {
  const { entry } = route;
  return entry !== undefined && ENTRIES.has(entry) ? (entry as AuthRoute) : undefined;
}

/** Whether `step` applies to the path of `req`, as the edge matched it. */
export function appliesTo(req: IncomingMessage, step: AuthStep): boolean {
  return authEntryOf(scopeOf(req).route)?.steps.includes(step) === true;
}

/** The realm the path of `req` names, as the edge read it (its entry's `{realm}`). */
export function realmOf(req: IncomingMessage): string | undefined {
  return scopeOf(req).route.realm;
}

/** What the request ends once Keycloak answers success, if its entry carries an ending rule. */
export function endingOf(route: Route): MatchedEnding | undefined {
  const rule = authEntryOf(route)?.ending;
  return rule && matchedEnding(rule, route.params);
}
