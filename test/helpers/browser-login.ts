import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { keycloakAdmin, type TestUser } from './keycloak.ts';

/** Where the browser-flow clients of the tests send their users back (nothing listens). */
export const REDIRECT_URI = 'http://127.0.0.1:9/callback';

/** Registers a public browser-flow client of `realm`, whose login pages tests post to: its id. */
export async function createBrowserClient(
  realm: string,
  clientId = `browser-${randomBytes(4).toString('hex')}`,
  attributes: Record<string, string> = {},
): Promise<string> {
  const admin = await keycloakAdmin();
  await admin.clients.create({
    realm,
    clientId,
    publicClient: true,
    standardFlowEnabled: true,
    redirectUris: [REDIRECT_URI],
    attributes,
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

/** A browser's cookies: name to value. */
export type CookieJar = Map<string, string>;

/** The `Cookie` header a browser sends with what `jar` holds. */
export const cookiesOf = (jar: CookieJar) =>
  [...jar].map(([name, value]) => `${name}=${value}`).join('; ');

/** Keeps the cookies `res` sets in `jar`, and forgets those it expires. */
export function keepCookies(res: Response, jar: CookieJar): void {
  for (const cookie of res.headers.getSetCookie()) {
    const [pair = ''] = cookie.split(';');
    const at = pair.indexOf('=');
    const name = pair.slice(0, at);
    const value = pair.slice(at + 1);
    if (value === '' || /;\s*max-age=0\b/i.test(cookie)) jar.delete(name);
    else jar.set(name, value);
  }
}

/** What an authorization-code login gets: its access, refresh and ID tokens. */
export interface CodeGrant {
  access: string;
  refresh: string;
  id: string;
}

/**
 * A browser's authorization-code login of `clientId` through the gateway at `base`: the login
 * form the first time, Keycloak's session cookie (kept in `jar`) after that, so every client
 * logged in with one jar shares one Keycloak session.
 */
export async function browserCodeLogin(
  base: string,
  user: TestUser,
  clientId: string,
  jar: CookieJar,
): Promise<CodeGrant> {
  let res = await fetch(authorizeUrl(base, user.realm, clientId), {
    redirect: 'manual',
    headers: { cookie: cookiesOf(jar) },
  });
  keepCookies(res, jar);
  if (res.status === 200) {
    res = await fetch(formActionOf(base, await res.text()), {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: cookiesOf(jar), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ username: user.username, password: user.password }).toString(),
    });
    keepCookies(res, jar);
  }
  expect(res.status).toBe(302);
  const code = new URL(res.headers.get('location')!).searchParams.get('code')!;
  const token = await fetch(`${base}/auth/realms/${user.realm}/protocol/openid-connect/token`, {
    method: 'POST',
    body: new URLSearchParams({
      client_id: clientId,
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT_URI,
    }),
  });
  const json = (await token.json()) as Record<string, string>;
  expect(token.status).toBe(200);
  return { access: json.access_token!, refresh: json.refresh_token!, id: json.id_token! };
}
