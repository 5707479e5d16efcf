import { MASTER_REALM } from '../tenancy/identifiers.ts';
import { encodeSegment } from '../edge/request-target.ts';
import type { Route } from '../edge/route.ts';
import { authEntryOf } from './auth-routes.ts';
import type { PageRewrite } from './rewrite-page.ts';
import { LEGACY_LINKS_SCRIPT, LEGACY_LINKS_SCRIPT_HASH } from './console-legacy-links.ts';

/**
 * Where a console address belongs, for the admin listener's canonical-host rule (see
 * edge/canonical-host.ts), from the route the edge read: the console page itself,
 * `/auth/admin/<realm>/console/` (its entry also serves it without its slash, which Keycloak
 * would redirect to the public address), and `/auth/admin/` (Keycloak answers 404 there) go to
 * the console page. Undefined for every other route.
 */
export function canonicalConsolePath(route: Route): string | undefined {
  const steps = authEntryOf(route)?.steps;
  if (steps?.includes('consoleHome')) return `/auth/admin/${MASTER_REALM}/console/`;
  if (steps?.includes('consolePage')) {
    return `/auth/admin/${encodeSegment(route.params.realm!)}/console/`;
  }
  return undefined;
}

/** How one Content-Security-Policy value lets the script run. */
export interface ScriptAllowance {
  /** The policy to send: unchanged, or with the script's hash in the directive that governs it. */
  policy: string;
  /** Keycloak's own nonce, when the policy has one: the script carries it instead of a hash. */
  nonce?: string;
}

const NONCE = /^'nonce-([A-Za-z0-9+/_=-]+)'$/i;
const HASH = /^'sha(256|384|512)-/i;

/**
 * Lets one inline script run under a Content-Security-Policy (possibly several policies joined
 * by commas) without loosening anything else: in each policy the directive that governs
 * `<script>` elements (`script-src-elem`, else `script-src`, else `default-src`) gets the
 * script's hash, or its nonce is reused. A policy without such a directive, or one that already
 * allows inline scripts ('unsafe-inline' with no hash or nonce, which a hash would switch off),
 * stays as it is. A nonce already chosen (`chosenNonce`, from another header) is the only one
 * reused. Undefined when the script cannot run ('none').
 */
export function allowScript(
  header: string,
  hash: string,
  chosenNonce?: string,
): ScriptAllowance | undefined {
  let nonce = chosenNonce;
  const policies: string[] = [];
  for (const policy of header.split(',')) {
    const directives = policy.split(';');
    const names = directives.map((d) => d.trim().split(/\s+/)[0]!.toLowerCase());
    const at = ['script-src-elem', 'script-src', 'default-src']
      .map((name) => names.indexOf(name))
      .find((index) => index >= 0);
    if (at === undefined) {
      policies.push(policy);
      continue;
    }
    const sources = directives[at]!.trim().split(/\s+/).slice(1);
    const lower = sources.map((s) => s.toLowerCase());
    if (lower.includes("'none'")) return undefined;
    const nonces = sources.map((s) => NONCE.exec(s)?.[1]).filter((n) => n !== undefined);
    const restricted =
      nonces.length > 0 || lower.some((s) => HASH.test(s)) || lower.includes("'strict-dynamic'");
    if (!restricted && lower.includes("'unsafe-inline'")) {
      policies.push(policy);
      continue;
    }
    if (nonces.length > 0 && (nonce === undefined || nonces.includes(nonce))) {
      nonce ??= nonces[0];
      policies.push(policy);
      continue;
    }
    directives[at] = `${directives[at]!.replace(/\s+$/, '')} ${hash}`;
    policies.push(directives.join(';'));
  }
  return { policy: policies.join(','), nonce };
}

/**
 * The console page with the legacy-links script as the first element of `<head>`, and the
 * policies that let it run; undefined when the page lacks `<head>` or a policy cannot allow it.
 */
export function withLegacyLinks(
  html: string,
  policies: readonly string[],
): { html: string; policies: string[] } | undefined {
  const head = /<head(?:\s[^>]*)?>/i.exec(html);
  if (!head) return undefined;
  let nonce: string | undefined;
  const edited: string[] = [];
  for (const header of policies) {
    const allowance = allowScript(header, LEGACY_LINKS_SCRIPT_HASH, nonce);
    if (!allowance) return undefined;
    nonce = allowance.nonce;
    edited.push(allowance.policy);
  }
  // A nonce is base64 (checked above): safe inside a quoted attribute.
  const tag = `<script${nonce ? ` nonce="${nonce}"` : ''}>${LEGACY_LINKS_SCRIPT}</script>`;
  const at = head.index + head[0].length;
  return { html: html.slice(0, at) + tag + html.slice(at), policies: edited };
}

/** The admin listener's own address and the public one, as configured. */
export interface ListenerUrls {
  publicUrl: string;
  adminUrl: string;
}

/**
 * The console page as the admin listener serves it: with the legacy-links script, and with
 * Keycloak's login kept on the admin listener. The console signs in at `serverBaseUrl`
 * (`authServerUrl` in older consoles), which Keycloak sets to its frontend, the public address;
 * but Keycloak's bootstrap administrator may not sign in on the public listener (see
 * bootstrap-admin-guard.ts). Undefined (page passed on untouched) when `<head>` is missing.
 */
export function rewriteConsolePage(urls: ListenerUrls): PageRewrite {
  const entries = ['serverBaseUrl', 'authServerUrl'].map((key) => [
    `"${key}": ${JSON.stringify(`${urls.publicUrl}/auth`)}`,
    `"${key}": ${JSON.stringify(`${urls.adminUrl}/auth`)}`,
  ]);
  return (html, csp) => {
    let page = html;
    for (const [from, to] of entries) page = page.replace(from!, to!);
    const scripted = withLegacyLinks(page, csp.enforced);
    const reports = scripted && withLegacyLinks(page, csp.reportOnly);
    if (!scripted || !reports) return undefined;
    return {
      html: scripted.html,
      csp: { enforced: scripted.policies, reportOnly: reports.policies },
    };
  };
}

/**
 * Keycloak's login pages as the admin listener serves them: their forms post to the admin
 * listener instead of the public address Keycloak writes (its frontend URL), so a login that
 * began on the admin listener ends there. Nothing else changes.
 */
export function rewriteLoginPage(urls: ListenerUrls): PageRewrite {
  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const action = new RegExp(
    `${escape(urls.publicUrl)}(/auth/realms/[^/"?&#]+/login-actions/)`,
    'g',
  );
  return (html, csp) => {
    if (!action.test(html)) return undefined;
    action.lastIndex = 0;
    return { html: html.replace(action, `${urls.adminUrl}$1`), csp };
  };
}
