import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { createHash } from 'node:crypto';

/**
 * Addresses of Keycloak's old (AngularJS) admin console, as documentation still gives them
 * (spec 5.3: `.../console/#/realms/master`), and the Keycloak 26 page each now means. Keycloak
 * 26 reads the first part of the fragment as the realm, so `#/realms/master` would open a realm
 * named "realms" and spin forever. `{r}` is the realm, `{id}` an id; each pattern covers the
 * whole fragment after `#/`, with an optional trailing slash. First match wins.
 */
export const LEGACY_CONSOLE_ROUTES: ReadonlyArray<readonly [string, string]> = [
  ['realms/{r}', '$1/realm-settings'],
  ['realms/{r}/login-settings', '$1/realm-settings/login'],
  ['realms/{r}/keys(?:/.*)?', '$1/realm-settings/keys'],
  ['realms/{r}/smtp-settings', '$1/realm-settings/email'],
  ['realms/{r}/theme-settings', '$1/realm-settings/themes'],
  ['realms/{r}/localization', '$1/realm-settings/localization'],
  ['realms/{r}/token-settings', '$1/realm-settings/tokens'],
  ['realms/{r}/defense/.*', '$1/realm-settings/security-defenses'],
  ['realms/{r}/events-settings', '$1/realm-settings/events'],
  ['realms/{r}/client-policies(?:/.*)?', '$1/realm-settings/client-policies'],
  ['realms/{r}/default-(?:roles|groups)', '$1/realm-settings/user-registration'],
  ['realms/{r}/(?:cache-settings|partial-import|partial-export)', '$1/realm-settings'],
  ['realms/{r}/clients', '$1/clients'],
  ['realms/{r}/clients/{id}/credentials(?:/.*)?', '$1/clients/$2/credentials'],
  ['realms/{r}/clients/{id}/roles(?:/.*)?', '$1/clients/$2/roles'],
  ['realms/{r}/clients/{id}/(?:saml/)?keys', '$1/clients/$2/keys'],
  ['realms/{r}/clients/{id}/(?:sessions|offline-access)', '$1/clients/$2/sessions'],
  ['realms/{r}/clients/{id}/service-account-roles', '$1/clients/$2/serviceAccount'],
  ['realms/{r}/clients/{id}/(?:add-)?mappers(?:/.*)?', '$1/clients/$2/clientScopes/dedicated'],
  ['realms/{r}/clients/{id}/scope-mappings', '$1/clients/$2/clientScopes/dedicated/scope'],
  ['realms/{r}/clients/{id}/client-scopes/evaluate-scopes', '$1/clients/$2/clientScopes/evaluate'],
  ['realms/{r}/clients/{id}/client-scopes(?:/.*)?', '$1/clients/$2/clientScopes/setup'],
  ['realms/{r}/clients/{id}/authz(?:/.*)?', '$1/clients/$2/authorization'],
  ['realms/{r}/clients/{id}/(?:revocation|clustering(?:/.*)?)', '$1/clients/$2/advanced'],
  ['realms/{r}/clients/{id}(?:/.*)?', '$1/clients/$2/settings'],
  [
    'realms/{r}/client-registration/client-initial-access(?:/.*)?',
    '$1/clients/initial-access-token',
  ],
  ['realms/{r}/client-registration(?:/.*)?', '$1/clients/client-registration'],
  ['realms/{r}/(?:default-)?client-scopes', '$1/client-scopes'],
  ['realms/{r}/client-scopes/{id}/(?:add-)?mappers(?:/.*)?', '$1/client-scopes/$2/mappers'],
  ['realms/{r}/client-scopes/{id}/scope-mappings', '$1/client-scopes/$2/scope'],
  ['realms/{r}/client-scopes/{id}', '$1/client-scopes/$2/settings'],
  ['realms/{r}/roles', '$1/roles'],
  ['realms/{r}/roles/{id}/role-attributes', '$1/roles/$2/attributes'],
  ['realms/{r}/roles/{id}/users', '$1/roles/$2/users-in-role'],
  ['realms/{r}/roles/{id}', '$1/roles/$2/details'],
  ['realms/{r}/users', '$1/users'],
  ['realms/{r}/users/{id}/user-attributes', '$1/users/$2/attributes'],
  ['realms/{r}/users/{id}/user-credentials', '$1/users/$2/credentials'],
  ['realms/{r}/users/{id}/role-mappings', '$1/users/$2/role-mapping'],
  ['realms/{r}/users/{id}/(groups|consents|sessions)', '$1/users/$2/$3'],
  ['realms/{r}/users/{id}/offline-sessions/.*', '$1/users/$2/sessions'],
  ['realms/{r}/users/{id}/federated-identity', '$1/users/$2/identity-provider-links'],
  ['realms/{r}/users/{id}(?:/.*)?', '$1/users/$2/settings'],
  ['realms/{r}/groups(?:/.*)?', '$1/groups'],
  ['realms/{r}/sessions(?:/.*)?', '$1/sessions'],
  ['realms/{r}/events', '$1/events'],
  ['realms/{r}/admin-events', '$1/events/admin-events'],
  ['realms/{r}/authentication/required-actions', '$1/authentication/required-actions'],
  ['realms/{r}/authentication/(?:password|otp)-policy', '$1/authentication/policies'],
  ['realms/{r}/authentication(?:/.*)?', '$1/authentication'],
  [
    'realms/{r}/identity-provider-settings/provider/{id}/{id}(?:/.*)?',
    '$1/identity-providers/$2/$3/settings',
  ],
  ['realms/{r}/identity-provider-(?:settings|mappers)(?:/.*)?', '$1/identity-providers'],
  ['realms/{r}/(?:user-federation|user-storage|ldap-mappers)(?:/.*)?', '$1/user-federation'],
  // Any other old page of a realm: that realm's welcome page rather than a spinner.
  ['realms/{r}/.*', '$1/'],
  ['create/client/{r}', '$1/clients/add-client'],
  ['import/client/{r}', '$1/clients/import-client'],
  ['create/user/{r}', '$1/users/add-user'],
  ['create/role/{r}', '$1/roles/new'],
  ['create/client-scope/{r}', '$1/client-scopes/new'],
  ['create/realm', `${MASTER_REALM}/realms`],
  ['server-info', `${MASTER_REALM}/info`],
];

/**
 * First segments of Keycloak 26's own addresses (`#/<realm>/<section>`): `#/realms/clients` is
 * the clients of a realm named "realms", never an old address, and is left alone.
 */
const CURRENT_SECTIONS = [
  'authentication',
  'client-scopes',
  'clients',
  'events',
  'groups',
  'identity-providers',
  'info',
  'organizations',
  'page-section',
  'permissions',
  'providers',
  'realm-settings',
  'realms',
  'roles',
  'sessions',
  'user-federation',
  'users',
  'welcome',
  'workflows',
];

/**
 * The script put into the console page: it runs before the console's own modules (which are
 * deferred) and, for an old address, replaces the fragment in place (no navigation, no request),
 * so the console and its login redirect see the Keycloak 26 address. Plain ES5: no build step.
 */
export const LEGACY_LINKS_SCRIPT =
  '(function(){var h=location.hash,r=' +
  JSON.stringify(LEGACY_CONSOLE_ROUTES) +
  ',i,p;if(!/^#\\/(realms|create|import|server-info)(\\/|$)/.test(h)||' +
  `/^#\\/realms\\/(${CURRENT_SECTIONS.join('|')})(\\/|\\?|$)/.test(h))return;` +
  'for(i=0;i<r.length;i++){p=new RegExp("^#/"+r[i][0].replace(/{r}|{id}/g,"([^/?]+)")+"/?(\\\\?.*)?$");' +
  'if(p.test(h)){history.replaceState(history.state,"",' +
  'location.pathname+location.search+h.replace(p,"#/"+r[i][1]));return}}})();';

/** The CSP source that allows exactly {@link LEGACY_LINKS_SCRIPT} as an inline script. */
export const LEGACY_LINKS_SCRIPT_HASH = `'sha256-${createHash('sha256').update(LEGACY_LINKS_SCRIPT, 'utf8').digest('base64')}'`;
