import { createHash } from 'node:crypto';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import {
  LEGACY_LINKS_SCRIPT,
  LEGACY_LINKS_SCRIPT_HASH,
} from '../../../src/auth-proxy/console-legacy-links.ts';
import {
  allowScript,
  canonicalConsolePath,
  rewriteConsolePage,
  rewriteLoginPage,
  withLegacyLinks,
} from '../../../src/auth-proxy/console-page.ts';
import { AUTH_ROUTES, authEntryOf } from '../../../src/auth-proxy/auth-routes.ts';
import { parseRequestTarget } from '../../../src/edge/request-target.ts';
import { compileRoutes } from '../../../src/edge/route.ts';

const read = compileRoutes(AUTH_ROUTES);
/** The route the edge reads for a request (its path decoded as the edge decodes it). */
function route(method: string, path: string) {
  const target = parseRequestTarget(path);
  if ('refused' in target) throw new Error(target.refused);
  return read(target.segments, method);
}
const steps = (method: string, path: string) => authEntryOf(route(method, path))?.steps ?? [];

/** Runs the script exactly as shipped, in a page whose address has `hash`; the hash it leaves. */
function landOn(hash: string): string {
  const location = { hash, pathname: '/auth/admin/master/console/', search: '' };
  const calls: string[] = [];
  runInNewContext(LEGACY_LINKS_SCRIPT, {
    location,
    history: {
      state: null,
      replaceState: (_s: unknown, _t: string, url: string) => calls.push(url),
    },
  });
  if (calls.length === 0) return hash;
  expect(calls).toHaveLength(1);
  expect(calls[0]!.startsWith('/auth/admin/master/console/#')).toBe(true);
  return calls[0]!.slice('/auth/admin/master/console/'.length);
}

describe('old console addresses', () => {
  it.each([
    // The spec's address, and the ones the issue names.
    ['#/realms/master', '#/master/realm-settings'],
    ['#/realms/master/', '#/master/realm-settings'],
    ['#/realms/demo-org', '#/demo-org/realm-settings'],
    ['#/realms/master/clients', '#/master/clients'],
    ['#/realms/master/realm-settings', '#/master/'],
    // Realm settings tabs of the old console.
    ['#/realms/master/token-settings', '#/master/realm-settings/tokens'],
    ['#/realms/master/login-settings', '#/master/realm-settings/login'],
    ['#/realms/master/keys', '#/master/realm-settings/keys'],
    ['#/realms/master/keys/providers', '#/master/realm-settings/keys'],
    ['#/realms/master/smtp-settings', '#/master/realm-settings/email'],
    ['#/realms/master/theme-settings', '#/master/realm-settings/themes'],
    ['#/realms/master/defense/brute-force', '#/master/realm-settings/security-defenses'],
    ['#/realms/master/events-settings', '#/master/realm-settings/events'],
    ['#/realms/master/default-roles', '#/master/realm-settings/user-registration'],
    ['#/realms/master/partial-export', '#/master/realm-settings'],
    // Clients.
    ['#/realms/acme/clients/5f1c', '#/acme/clients/5f1c/settings'],
    ['#/realms/acme/clients/5f1c/credentials', '#/acme/clients/5f1c/credentials'],
    ['#/realms/acme/clients/5f1c/roles/r1', '#/acme/clients/5f1c/roles'],
    ['#/realms/acme/clients/5f1c/mappers', '#/acme/clients/5f1c/clientScopes/dedicated'],
    [
      '#/realms/acme/clients/5f1c/scope-mappings',
      '#/acme/clients/5f1c/clientScopes/dedicated/scope',
    ],
    ['#/realms/acme/clients/5f1c/service-account-roles', '#/acme/clients/5f1c/serviceAccount'],
    ['#/realms/acme/clients/5f1c/offline-access', '#/acme/clients/5f1c/sessions'],
    ['#/realms/acme/clients/5f1c/revocation', '#/acme/clients/5f1c/advanced'],
    ['#/realms/acme/clients/5f1c/installation', '#/acme/clients/5f1c/settings'],
    [
      '#/realms/acme/client-registration/client-initial-access',
      '#/acme/clients/initial-access-token',
    ],
    ['#/realms/acme/client-scopes', '#/acme/client-scopes'],
    ['#/realms/acme/client-scopes/9a/mappers', '#/acme/client-scopes/9a/mappers'],
    ['#/realms/acme/client-scopes/9a', '#/acme/client-scopes/9a/settings'],
    // Users, roles, groups, sessions, events, authentication, providers, federation.
    ['#/realms/acme/users', '#/acme/users'],
    ['#/realms/acme/users/u1', '#/acme/users/u1/settings'],
    ['#/realms/acme/users/u1/user-credentials', '#/acme/users/u1/credentials'],
    ['#/realms/acme/users/u1/role-mappings', '#/acme/users/u1/role-mapping'],
    ['#/realms/acme/users/u1/sessions', '#/acme/users/u1/sessions'],
    ['#/realms/acme/users/u1/offline-sessions/c1', '#/acme/users/u1/sessions'],
    ['#/realms/acme/users/u1/federated-identity', '#/acme/users/u1/identity-provider-links'],
    ['#/realms/acme/roles', '#/acme/roles'],
    ['#/realms/acme/roles/r1', '#/acme/roles/r1/details'],
    ['#/realms/acme/groups/g1', '#/acme/groups'],
    ['#/realms/acme/sessions/realm', '#/acme/sessions'],
    ['#/realms/acme/events', '#/acme/events'],
    ['#/realms/acme/admin-events', '#/acme/events/admin-events'],
    ['#/realms/acme/authentication/flows', '#/acme/authentication'],
    ['#/realms/acme/authentication/required-actions', '#/acme/authentication/required-actions'],
    ['#/realms/acme/authentication/otp-policy', '#/acme/authentication/policies'],
    ['#/realms/acme/identity-provider-settings', '#/acme/identity-providers'],
    [
      '#/realms/acme/identity-provider-settings/provider/oidc/corp',
      '#/acme/identity-providers/oidc/corp/settings',
    ],
    ['#/realms/acme/user-federation', '#/acme/user-federation'],
    ['#/realms/acme/user-storage/providers/ldap/c1', '#/acme/user-federation'],
    ['#/realms/acme/something-else/x', '#/acme/'],
    ['#/realms/acme/clients?x=1', '#/acme/clients'],
    // Pages outside a realm.
    ['#/create/client/acme', '#/acme/clients/add-client'],
    ['#/create/user/acme', '#/acme/users/add-user'],
    ['#/import/client/acme', '#/acme/clients/import-client'],
    ['#/create/realm', '#/master/realms'],
    ['#/server-info', '#/master/info'],
  ])('%s lands on %s', (legacy, current) => {
    expect(landOn(legacy)).toBe(current);
  });

  it.each([
    '',
    '#',
    '#/',
    '#/master/',
    '#/master/realm-settings/sessions',
    '#/acme/clients/5f1c/advanced',
    // Keycloak 26 addresses of a realm named "realms" stay as they are.
    '#/realms/clients',
    '#/realms/realm-settings/tokens',
    '#/realms/users/u1/settings',
    '#/realmsx/clients',
  ])('%j is left alone', (hash) => {
    expect(landOn(hash)).toBe(hash);
  });

  it('is one small script that cannot close its own tag, with the hash of its exact text', () => {
    expect(LEGACY_LINKS_SCRIPT.length).toBeLessThan(5000);
    expect(LEGACY_LINKS_SCRIPT).not.toMatch(/<\//);
    const digest = createHash('sha256').update(LEGACY_LINKS_SCRIPT).digest('base64');
    expect(LEGACY_LINKS_SCRIPT_HASH).toBe(`'sha256-${digest}'`);
  });
});

describe('allowScript: the CSP edit', () => {
  const H = "'sha256-abc='";

  it.each([
    // Keycloak's default: no directive governs scripts, inline scripts run; unchanged.
    [
      "frame-src 'self'; frame-ancestors 'self'; object-src 'none';",
      "frame-src 'self'; frame-ancestors 'self'; object-src 'none';",
    ],
    ["script-src 'self'", `script-src 'self' ${H}`],
    ["default-src 'self'; img-src *", `default-src 'self' ${H}; img-src *`],
    [
      "default-src 'self'; script-src 'self' 'strict-dynamic'",
      `default-src 'self'; script-src 'self' 'strict-dynamic' ${H}`,
    ],
    ["script-src-elem 'self'; script-src 'self'", `script-src-elem 'self' ${H}; script-src 'self'`],
    // 'unsafe-inline' alone already allows it; a hash would switch it off for Keycloak's own.
    ["script-src 'self' 'unsafe-inline'", "script-src 'self' 'unsafe-inline'"],
    // With a hash already there, 'unsafe-inline' is ignored: add ours.
    ["script-src 'unsafe-inline' 'sha256-x='", `script-src 'unsafe-inline' 'sha256-x=' ${H}`],
    // Two policies: each one must allow it.
    ["script-src 'self', default-src 'none'; img-src *", undefined],
    ["script-src 'self', object-src 'none'", `script-src 'self' ${H}, object-src 'none'`],
    ["script-src 'none'", undefined],
  ])('%j becomes %j', (policy, expected) => {
    expect(allowScript(policy, H)?.policy).toBe(expected);
  });

  it("reuses Keycloak's nonce and leaves the policy as it is", () => {
    expect(allowScript("script-src 'nonce-R4nd0m+/='", H)).toEqual({
      policy: "script-src 'nonce-R4nd0m+/='",
      nonce: 'R4nd0m+/=',
    });
  });
});

describe('the console page', () => {
  const urls = { publicUrl: 'http://api.example:8000', adminUrl: 'http://admin.example:8001' };
  const page = [
    '<!doctype html>\n<html lang="en">\n  <head>\n    <meta charset="utf-8">',
    '<script type="importmap">{}</script></head><body><script id="environment" type="application/json">',
    '{ "serverBaseUrl": "http://api.example:8000/auth",',
    '"authServerUrl": "http://api.example:8000/auth", "realm": "master" }</script></body></html>',
  ].join('\n');

  it('gets the script first in <head>, the login on the admin listener, nothing else', () => {
    const csp = "frame-src 'self'; object-src 'none';";
    const out = rewriteConsolePage(urls)(page, { enforced: [csp], reportOnly: [] })!;
    expect(out.csp).toEqual({ enforced: [csp], reportOnly: [] });
    const expected = page
      .replace('<head>', `<head><script>${LEGACY_LINKS_SCRIPT}</script>`)
      .replace(
        '"serverBaseUrl": "http://api.example:8000/auth"',
        '"serverBaseUrl": "http://admin.example:8001/auth"',
      )
      .replace(
        '"authServerUrl": "http://api.example:8000/auth"',
        '"authServerUrl": "http://admin.example:8001/auth"',
      );
    expect(out.html).toBe(expected);
  });

  it('gets the hash into a policy that governs scripts, or carries the nonce', () => {
    const hashed = rewriteConsolePage(urls)(page, {
      enforced: ["script-src 'self' 'sha256-k='"],
      reportOnly: ["default-src 'self'"],
    })!;
    expect(hashed.csp.enforced).toEqual([
      `script-src 'self' 'sha256-k=' ${LEGACY_LINKS_SCRIPT_HASH}`,
    ]);
    expect(hashed.csp.reportOnly).toEqual([`default-src 'self' ${LEGACY_LINKS_SCRIPT_HASH}`]);
    const nonced = withLegacyLinks(page, ["script-src 'nonce-abc123'"])!;
    expect(nonced.html).toContain(`<head><script nonce="abc123">${LEGACY_LINKS_SCRIPT}</script>`);
    expect(nonced.policies).toEqual(["script-src 'nonce-abc123'"]);
  });

  it('passes through untouched without <head> or when no policy can allow the script', () => {
    const rewrite = rewriteConsolePage(urls);
    expect(
      rewrite('<html><body>x</body></html>', { enforced: [], reportOnly: [] }),
    ).toBeUndefined();
    expect(rewrite(page, { enforced: ["script-src 'none'"], reportOnly: [] })).toBeUndefined();
    expect(
      withLegacyLinks(page, ["script-src 'nonce-a'", "script-src 'nonce-b'"])?.policies,
    ).toEqual(["script-src 'nonce-a'", `script-src 'nonce-b' ${LEGACY_LINKS_SCRIPT_HASH}`]);
  });

  it('login pages post to the admin listener', () => {
    const form =
      '<form action="http://api.example:8000/auth/realms/master/login-actions/authenticate?session_code=x&amp;tab_id=y">' +
      '<a href="http://api.example:8000/auth/realms/master/account">account</a>';
    const out = rewriteLoginPage(urls)(form, { enforced: ['c'], reportOnly: [] })!;
    expect(out.html).toBe(
      form.replace(
        'http://api.example:8000/auth/realms/master/login-actions/',
        'http://admin.example:8001/auth/realms/master/login-actions/',
      ),
    );
    expect(out.csp.enforced).toEqual(['c']);
    expect(
      rewriteLoginPage(urls)('<p>no form</p>', { enforced: [], reportOnly: [] }),
    ).toBeUndefined();
  });

  it('knows its paths', () => {
    // As the edge reads them: the /auth table's entries (auth-routes.ts) and their steps.
    expect(steps('GET', '/auth/admin/master/console/')).toContain('consolePage');
    // Without its slash, the console page's entry too (a trailing slash changes no entry), but
    // never rewritten: the admin listener redirects it to the page first (canonicalConsolePath),
    // and Keycloak answers it with a redirect, which no rewrite touches (rewrite-page.ts).
    expect(steps('GET', '/auth/admin/master/console')).toContain('consolePage');
    expect(steps('GET', '/auth/admin/master/console/whoami')).not.toContain('consolePage');
    expect(steps('GET', '/auth/realms/master/protocol/openid-connect/auth')).toContain('loginPage');
    expect(steps('GET', '/auth/realms/master/login-actions/authenticate')).toContain('loginPage');
    expect(steps('POST', '/auth/realms/master/login-actions/authenticate')).toContain('loginPage');
    expect(steps('GET', '/auth/realms/master/protocol/openid-connect/token')).not.toContain(
      'loginPage',
    );
    expect(canonicalConsolePath(route('GET', '/auth/admin'))).toBe('/auth/admin/master/console/');
    expect(canonicalConsolePath(route('GET', '/auth/admin/'))).toBe('/auth/admin/master/console/');
    expect(canonicalConsolePath(route('GET', '/auth/admin/acme/console'))).toBe(
      '/auth/admin/acme/console/',
    );
    expect(canonicalConsolePath(route('GET', '/auth/admin/a%20b/console/'))).toBe(
      '/auth/admin/a%20b/console/',
    );
    expect(canonicalConsolePath(route('GET', '/auth/admin/realms/master'))).toBeUndefined();
    expect(canonicalConsolePath(route('GET', '/auth/admin/master/console/whoami'))).toBeUndefined();
  });
});
