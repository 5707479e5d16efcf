import { generateKeyPair, SignJWT } from 'jose';
import type { HTTPRequest } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { launchChromium, signIn } from '../helpers/browser.ts';
import {
  REDIRECT_URI,
  authorizeUrl,
  browserCodeLogin,
  cookiesOf,
  createBrowserClient,
  keepCookies,
  type CodeGrant,
  type CookieJar,
} from '../helpers/browser-login.ts';
import {
  claimsOf,
  createUser,
  keycloakAdmin,
  openidTokensAt,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';

// OpenID Connect RP-initiated logout (Keycloak's `.../protocol/openid-connect/logout`) through
// the gateway, against the real Keycloak. The replica shares the test gateway's Redis prefix
// and never re-checks tokens: what it refuses right after Keycloak's answer, the logout's
// pass-through ended (access-endings.ts); what it serves, nothing ended. Its browser client has
// no back-channel logout URL, as a realm's own browser clients (the account console) have none:
// a logout confirmed on Keycloak's confirmation page is Keycloak's alone, which the gateway
// learns at the re-check (docs/security-model.md), so those tests check Keycloak's side.

/** Where the client may send its users after a logout (registered; nothing listens). */
const LOGGED_OUT_URI = 'http://127.0.0.1:9/logged-out';

let replica: Replica;
let org: string;
let app: string;
const oidc = (realm: string) => `${replica.url}/auth/realms/${realm}/protocol/openid-connect`;

/** A public browser-flow client that registers LOGGED_OUT_URI for after a logout. */
async function createLogoutClient(realm: string, clientId = 'logout-app'): Promise<string> {
  return createBrowserClient(realm, clientId, { 'post.logout.redirect.uris': LOGGED_OUT_URI });
}

/** A password grant of the realm's API client: a session of its own. */
async function passwordGrant(user: TestUser): Promise<CodeGrant> {
  const tokens = await openidTokensAt(`${replica.url}/auth`, user);
  return { access: tokens.access_token, refresh: tokens.refresh_token, id: tokens.id_token };
}

/** The replica's answer to an API call of the realm with `authorization`. */
async function apiStatus(realm: string, authorization: string): Promise<number> {
  const res = await fetch(`${replica.url}/api/${realm}/platform/workspaces`, {
    headers: { authorization },
  });
  await res.arrayBuffer();
  return res.status;
}

const bearer = (grant: CodeGrant) => `Bearer ${grant.access}`;

/** The user's sessions as Keycloak holds them. */
async function sessionsOf(user: TestUser): Promise<string[]> {
  const admin = await keycloakAdmin();
  const sessions = await admin.users.listSessions({ realm: user.realm, id: await userIdOf(user) });
  return sessions.map((session) => session.id!);
}

const sidOf = (grant: CodeGrant) => claimsOf(grant.id).sid as string;

/** A GET of the logout endpoint through the replica, as a browser sends it (`jar`'s cookies). */
async function logoutGet(realm: string, params: Record<string, string>, jar?: CookieJar) {
  const res = await fetch(`${oidc(realm)}/logout?${new URLSearchParams(params).toString()}`, {
    redirect: 'manual',
    headers: jar ? { cookie: cookiesOf(jar) } : {},
  });
  if (jar) keepCookies(res, jar);
  return { status: res.status, location: res.headers.get('location'), page: await res.text() };
}

/** Keycloak's logout confirmation page: its form posts to `logout-confirm` (group 1). */
const CONFIRMATION_FORM = /<form[^>]+action="([^"]*\/logout\/logout-confirm[^"]*)"/;

/** A user logged in on the browser client, whose session the replica serves. */
async function loggedIn(realm = org, clientId = app) {
  const user = await createUser(realm);
  const jar: CookieJar = new Map();
  const grant = await browserCodeLogin(replica.url, user, clientId, jar);
  expect(await apiStatus(realm, bearer(grant))).toBe(200);
  return { user, jar, grant };
}

const headerOf = (jwt: string) =>
  JSON.parse(Buffer.from(jwt.split('.')[0]!, 'base64url').toString()) as Record<string, unknown>;

beforeAll(async () => {
  replica = await startReplica(19690, {
    REDIS_URL: testEnv().redisUrl,
    REDIS_KEY_PREFIX: testEnv().redisKeyPrefix,
    REVOCATION_CHECK_SECONDS: 'off',
  });
  org = await createOrganization(['ws']);
  app = await createLogoutClient(org);
});
afterAll(async () => {
  await replica?.gateway.close();
  await closeTestDb();
});

describe('a logout with a valid ID token hint', () => {
  it("from the user's browser, to a registered post_logout_redirect_uri: Keycloak ends the session and redirects; its tokens are refused at once, the user's other sessions and Basic logins are not", async () => {
    const { user, jar, grant } = await loggedIn();
    const other = await passwordGrant(user);
    expect(await apiStatus(org, bearer(other))).toBe(200);
    expect(await apiStatus(org, basicAuth(user))).toBe(200);

    const res = await logoutGet(
      org,
      { id_token_hint: grant.id, post_logout_redirect_uri: LOGGED_OUT_URI, state: 'st-1' },
      jar,
    );
    expect(res.status).toBe(302);
    expect(res.location).toBe(`${LOGGED_OUT_URI}?state=st-1`);
    expect(await sessionsOf(user)).not.toContain(sidOf(grant));
    // Applied before the answer: no waiting.
    expect(await apiStatus(org, bearer(grant))).toBe(401);
    // A logout ends one session, as in Keycloak.
    expect(await sessionsOf(user)).toContain(claimsOf(other.access).sid);
    expect(await apiStatus(org, bearer(other))).toBe(200);
    expect(await apiStatus(org, basicAuth(user))).toBe(200);
    // The browser's session is gone: a new login asks for the password again.
    const login = await fetch(authorizeUrl(replica.url, org, app), {
      redirect: 'manual',
      headers: { cookie: cookiesOf(jar) },
    });
    expect(login.status).toBe(200);
    expect(await login.text()).toContain('id="password"');
  });

  it("posted by the client's back end (no browser cookie), with client_id: the same", async () => {
    const { user, grant } = await loggedIn();
    const res = await fetch(`${oidc(org)}/logout`, {
      method: 'POST',
      redirect: 'manual',
      body: new URLSearchParams({
        id_token_hint: grant.id,
        client_id: app,
        post_logout_redirect_uri: LOGGED_OUT_URI,
      }),
    });
    expect(res.status).toBe(302);
    expect(res.headers.get('location')).toBe(LOGGED_OUT_URI);
    expect(await sessionsOf(user)).not.toContain(sidOf(grant));
    expect(await apiStatus(org, bearer(grant))).toBe(401);
  });

  it('expired: Keycloak still ends the session it names, and so does the gateway', async () => {
    const shortLived = await createLogoutClient(org, 'short-id-tokens');
    const admin = await keycloakAdmin();
    const [client] = await admin.clients.find({ realm: org, clientId: shortLived });
    await admin.clients.update(
      { realm: org, id: client!.id! },
      { ...client, attributes: { ...client!.attributes, 'access.token.lifespan': '1' } },
    );
    const { user, jar, grant } = await loggedIn();
    // One session, two clients: the short-lived client's ID token, the other's access token.
    const short = await browserCodeLogin(replica.url, user, shortLived, jar);
    expect(sidOf(short)).toBe(sidOf(grant));
    const exp = Number(claimsOf(short.id).exp);
    await expect
      .poll(() => Date.now() / 1000 > exp + 1, { timeout: 10_000, interval: 100 })
      .toBe(true);

    const res = await logoutGet(org, {
      id_token_hint: short.id,
      post_logout_redirect_uri: LOGGED_OUT_URI,
    });
    expect(res.status).toBe(302);
    expect(await sessionsOf(user)).not.toContain(sidOf(grant));
    expect(await apiStatus(org, bearer(grant))).toBe(401);
  });
});

describe('HEAD of the logout endpoint', () => {
  it('is refused (405) before Keycloak, which would end the session and answer 200 with no page to read', async () => {
    const { user, jar, grant } = await loggedIn();
    const query = new URLSearchParams({ id_token_hint: grant.id }).toString();
    const res = await fetch(`${oidc(org)}/logout?${query}`, {
      method: 'HEAD',
      redirect: 'manual',
      headers: { cookie: cookiesOf(jar) },
    });
    expect([res.status, res.headers.get('allow')]).toEqual([405, 'GET, POST']);
    expect(await sessionsOf(user)).toContain(sidOf(grant));
    expect(await apiStatus(org, bearer(grant))).toBe(200);
  });
});

describe('a hint Keycloak refuses, or a logout Keycloak does not do, ends nothing', () => {
  it('a hint of another realm, unsigned (alg none), or signed by another key: 400, the session lives on', async () => {
    const { user, grant } = await loggedIn();
    const claims = claimsOf(grant.id);
    // Another organization's ID token for the same-named session claims: its own realm's key.
    const otherOrg = await createOrganization(['ws']);
    const otherApp = await createLogoutClient(otherOrg);
    const foreign = await loggedIn(otherOrg, otherApp);
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.`;
    const { privateKey } = await generateKeyPair('RS256');
    const otherKey = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: String(headerOf(grant.id).kid) })
      .sign(privateKey);
    for (const hint of [foreign.grant.id, none, otherKey]) {
      const res = await logoutGet(org, {
        id_token_hint: hint,
        post_logout_redirect_uri: LOGGED_OUT_URI,
      });
      expect(res.status).toBe(400);
      expect(res.location).toBeNull();
    }
    expect(await sessionsOf(user)).toContain(sidOf(grant));
    expect(await apiStatus(org, bearer(grant))).toBe(200);
    expect(await sessionsOf(foreign.user)).toContain(sidOf(foreign.grant));
    expect(await apiStatus(otherOrg, bearer(foreign.grant))).toBe(200);
  });

  it('a valid hint with a client_id Keycloak does not know: 400, the session lives on', async () => {
    const { user, grant } = await loggedIn();
    const res = await logoutGet(org, { id_token_hint: grant.id, client_id: 'no-such-client' });
    expect(res.status).toBe(400);
    expect(await sessionsOf(user)).toContain(sidOf(grant));
    expect(await apiStatus(org, bearer(grant))).toBe(200);
  });

  it("a valid hint from a browser signed in to another session: Keycloak's confirmation page, nothing ended", async () => {
    const { user, grant } = await loggedIn();
    // The same user signed in again in another browser, which then sends the first's hint.
    const elsewhere: CookieJar = new Map();
    const second = await browserCodeLogin(replica.url, user, app, elsewhere);
    expect(sidOf(second)).not.toBe(sidOf(grant));
    const res = await logoutGet(org, { id_token_hint: grant.id }, elsewhere);
    expect(res.status).toBe(200);
    expect(res.page).toMatch(CONFIRMATION_FORM);
    expect(await sessionsOf(user)).toEqual(expect.arrayContaining([sidOf(grant), sidOf(second)]));
    expect(await apiStatus(org, bearer(grant))).toBe(200);
    expect(await apiStatus(org, bearer(second))).toBe(200);
  });

  it("a refresh token sent twice with another user's hint: Keycloak ends the refresh token's session only, and so does the gateway", async () => {
    const { user: victim, grant: victimGrant } = await loggedIn();
    const caller = await createUser(org);
    const own = await passwordGrant(caller);
    // Keycloak takes a form with `refresh_token` as a refresh-token logout (its first value).
    const res = await fetch(`${oidc(org)}/logout`, {
      method: 'POST',
      redirect: 'manual',
      body: new URLSearchParams([
        ['client_id', apiClientIdOf(org)],
        ['refresh_token', own.refresh],
        ['refresh_token', own.refresh],
        ['id_token_hint', victimGrant.id],
      ]),
    });
    expect(res.status).toBe(204);
    expect(await sessionsOf(caller)).not.toContain(claimsOf(own.access).sid);
    expect(await sessionsOf(victim)).toContain(sidOf(victimGrant));
    expect(await apiStatus(org, bearer(victimGrant))).toBe(200);
  });
});

describe('a logout answered with a page larger than the gateway holds whole (16 KiB)', () => {
  // A realm's display name is written into every page of its login theme, Keycloak's own theme
  // included: a long one makes the logout's pages larger than the gateway reads at once.
  const LONG_NAME = 'Acme Long Display Name '.repeat(1200);
  let big: string;
  let bigApp: string;

  beforeAll(async () => {
    big = await createOrganization(['ws']);
    bigApp = await createLogoutClient(big);
    const admin = await keycloakAdmin();
    await admin.realms.update({ realm: big }, { displayNameHtml: LONG_NAME });
  });

  it("Keycloak's logged-out page: the session's tokens are refused at once, and the page reaches the client whole", async () => {
    const { user, jar, grant } = await loggedIn(big, bigApp);
    const res = await logoutGet(big, { id_token_hint: grant.id }, jar);
    expect(res.status).toBe(200);
    expect(res.page.length).toBeGreaterThan(16 * 1024);
    expect(res.page).toContain(LONG_NAME.trim());
    expect(res.page.trimEnd()).toMatch(/<\/html>$/);
    expect(res.page).not.toMatch(CONFIRMATION_FORM);
    expect(await sessionsOf(user)).not.toContain(sidOf(grant));
    // Applied before the answer: no waiting.
    expect(await apiStatus(big, bearer(grant))).toBe(401);
  });

  it("Keycloak's confirmation page, its form past the first 16 KiB: nothing ended, the page whole", async () => {
    const { user, grant } = await loggedIn(big, bigApp);
    const elsewhere: CookieJar = new Map();
    const second = await browserCodeLogin(replica.url, user, bigApp, elsewhere);
    const res = await logoutGet(big, { id_token_hint: grant.id }, elsewhere);
    expect(res.status).toBe(200);
    expect(res.page.search(CONFIRMATION_FORM)).toBeGreaterThan(16 * 1024);
    expect(res.page.trimEnd()).toMatch(/<\/html>$/);
    expect(await sessionsOf(user)).toEqual(expect.arrayContaining([sidOf(grant), sidOf(second)]));
    expect(await apiStatus(big, bearer(grant))).toBe(200);
  });
});

describe("Keycloak's logout confirmation page (no ID token hint) through the public listener", () => {
  it("names no address but the gateway's, keeps its code, and ends the browser session when confirmed", async () => {
    const { user, jar, grant } = await loggedIn();
    const res = await logoutGet(
      org,
      { client_id: app, post_logout_redirect_uri: LOGGED_OUT_URI, state: 'st-2' },
      jar,
    );
    expect(res.status).toBe(200);
    expect(res.page).toMatch(CONFIRMATION_FORM);
    // Keycloak writes the form's address as a path (measured): the browser posts it to the
    // gateway address that served the page, whichever it was.
    const written = CONFIRMATION_FORM.exec(res.page)![1]!.replaceAll('&amp;', '&');
    expect(written).toMatch(/^\/auth\/realms\//);
    const action = new URL(written, `${oidc(org)}/logout`);
    expect(action.pathname).toBe(
      `/auth/realms/${org}/protocol/openid-connect/logout/logout-confirm`,
    );
    const code = /name="session_code"\s+value="([^"]+)"/.exec(res.page)?.[1];
    expect(code).toBeTruthy();
    // Nothing of Keycloak's own address (its port) in the page.
    const keycloak = new URL(testEnv().keycloakUrl);
    expect(res.page).not.toContain(keycloak.host);
    // Shown, not done: the session lives.
    expect(await sessionsOf(user)).toContain(sidOf(grant));
    expect(await apiStatus(org, bearer(grant))).toBe(200);

    const confirmed = await fetch(`${replica.url}${action.pathname}${action.search}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: cookiesOf(jar), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ session_code: code!, confirmLogout: 'Log out' }).toString(),
    });
    expect(confirmed.status).toBe(302);
    expect(confirmed.headers.get('location')).toBe(`${LOGGED_OUT_URI}?state=st-2`);
    expect(await sessionsOf(user)).not.toContain(sidOf(grant));
  });
});

describe("Keycloak's logout confirmation page in a real browser, on the public URL", () => {
  it('loads only from the public URL and logs the browser out when its button is clicked', async () => {
    const user = await createUser(org);
    const publicUrl = testEnv().publicUrl;
    const browser = await launchChromium();
    try {
      const page = await browser.newPage();
      page.setDefaultTimeout(20_000);
      // The client's origin (nothing listens there: its redirects, its favicon) is answered
      // here; every other request goes out and is recorded.
      const asked: string[] = [];
      await page.setRequestInterception(true);
      page.on('request', (request: HTTPRequest) => {
        const url = request.url();
        if (url.startsWith(`${new URL(REDIRECT_URI).origin}/`)) {
          void request.respond({ status: 200, contentType: 'text/plain', body: 'client' });
          return;
        }
        asked.push(url);
        void request.continue();
      });
      await page.goto(authorizeUrl(publicUrl, org, app));
      await signIn(page, user.username, user.password);
      expect(page.url().startsWith(REDIRECT_URI)).toBe(true);
      const [sid] = await sessionsOf(user);
      expect(sid).toBeDefined();

      const query = new URLSearchParams({
        client_id: app,
        post_logout_redirect_uri: LOGGED_OUT_URI,
        state: 'st-3',
      });
      await page.goto(
        `${publicUrl}/auth/realms/${org}/protocol/openid-connect/logout?${query.toString()}`,
      );
      await page.waitForSelector('#kc-logout');
      expect(await sessionsOf(user)).toEqual([sid]);
      await Promise.all([page.waitForNavigation(), page.click('#kc-logout')]);
      expect(page.url()).toBe(`${LOGGED_OUT_URI}?state=st-3`);
      expect(await sessionsOf(user)).toEqual([]);
      // Every page, style and script came through the gateway's public URL.
      expect(asked.length).toBeGreaterThan(0);
      expect(asked.filter((url) => !url.startsWith(`${publicUrl}/`))).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
