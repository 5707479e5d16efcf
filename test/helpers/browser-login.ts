import { randomBytes } from 'node:crypto';
import { keycloakAdmin } from './keycloak.ts';

/** Where the browser-flow clients of the tests send their users back (nothing listens). */
export const REDIRECT_URI = 'http://127.0.0.1:9/callback';

/** Registers a public browser-flow client of `realm`, whose login pages tests post to: its id. */
export async function createBrowserClient(
  realm: string,
  clientId = `browser-${randomBytes(4).toString('hex')}`,
): Promise<string> {
  const admin = await keycloakAdmin();
  await admin.clients.create({
    realm,
    clientId,
    publicClient: true,
    standardFlowEnabled: true,
    redirectUris: [REDIRECT_URI],
  });
  return clientId;
}

/**
 * The address a browser starts a login at, on `base`: the realm's authorization endpoint, or
 * with `endpoint` 'registrations' its registration page.
 */
export function authorizeUrl(
  base: string,
  realm: string,
  clientId: string,
  endpoint: 'auth' | 'registrations' = 'auth',
): string {
  const query = new URLSearchParams({
    client_id: clientId,
    response_type: 'code',
    redirect_uri: REDIRECT_URI,
    scope: 'openid',
  });
  return `${base}/auth/realms/${realm}/protocol/openid-connect/${endpoint}?${query.toString()}`;
}

/** A login page's form: where it posts, on `base` (Keycloak names it on its public URL). */
export function formActionOf(base: string, page: string): string {
  const action = new URL(/action="([^"]+)"/.exec(page)![1]!.replaceAll('&amp;', '&'));
  return `${base}${action.pathname}${action.search}`;
}

/** The `Cookie` header a browser sends back after an answer that set `setCookie`. */
export function cookieHeaderOf(setCookie: string | string[] | undefined): string {
  return [setCookie ?? []]
    .flat()
    .map((set) => set.split(';')[0])
    .join('; ');
}
