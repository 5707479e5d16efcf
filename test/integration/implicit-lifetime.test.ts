import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import {
  REDIRECT_URI,
  cookiesOf,
  formActionOf,
  keepCookies,
  type CookieJar,
} from '../helpers/browser-login.ts';
import {
  claimsOf,
  createUser,
  keycloakAdmin,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * A browser client of the implicit flow gets its access tokens from the authorization endpoint,
 * for the realm's implicit-flow lifetime (Keycloak's default: 900 s), longer than the realm's
 * access-token lifetime (300 s). A refusal of the user's tokens must last as long as those,
 * though the gateway never served one before. No re-check (REVOCATION_CHECK_SECONDS=off), so
 * only the revocation list can refuse them. Port 19994 (admin listener 19995).
 */
describe('a refusal outlives an implicit-flow token', () => {
  const clock = aheadClock();
  let replica: Replica;
  const adminUrl = 'http://127.0.0.1:19995';
  beforeAll(async () => {
    replica = await startReplica(19994, { REVOCATION_CHECK_SECONDS: 'off' }, undefined, clock);
  });
  afterAll(async () => {
    await replica.gateway.close();
    await closeTestDb();
  });

  async function status(realm: string, token: string): Promise<number> {
    const res = await fetch(`${replica.url}/api/${realm}/platform/workspaces`, {
      headers: { authorization: `Bearer ${token}` },
    });
    return res.status;
  }

  /** A user disabled through the replica's admin listener, as the console does it. */
  async function disable(user: TestUser): Promise<void> {
    const login = await fetch(`${adminUrl}/auth/realms/master/protocol/openid-connect/token`, {
      method: 'POST',
      body: new URLSearchParams({
        client_id: 'admin-cli',
        grant_type: 'password',
        username: testEnv().keycloakAdminUsername,
        password: testEnv().keycloakAdminPassword,
      }),
    });
    const { access_token: adminToken } = (await login.json()) as { access_token: string };
    const res = await fetch(
      `${adminUrl}/auth/admin/realms/${user.realm}/users/${await userIdOf(user)}`,
      {
        method: 'PUT',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ enabled: false }),
      },
    );
    expect(res.status).toBe(204);
  }

  /** A public client of the realm allowed the implicit flow, with `attributes` of its own. */
  async function createImplicitClient(realm: string, attributes: Record<string, string> = {}) {
    const clientId = `implicit-${randomBytes(4).toString('hex')}`;
    const admin = await keycloakAdmin();
    await admin.clients.create({
      realm,
      clientId,
      publicClient: true,
      standardFlowEnabled: false,
      implicitFlowEnabled: true,
      redirectUris: [REDIRECT_URI],
      attributes,
    });
    return clientId;
  }

  /** An access token of the implicit flow: the login form posted, the token in the fragment. */
  async function implicitLogin(user: TestUser, clientId: string): Promise<string> {
    const jar: CookieJar = new Map();
    const query = new URLSearchParams({
      client_id: clientId,
      response_type: 'token',
      redirect_uri: REDIRECT_URI,
      scope: 'openid',
      nonce: randomBytes(8).toString('hex'),
    });
    const base = replica.url;
    const page = await fetch(
      `${base}/auth/realms/${user.realm}/protocol/openid-connect/auth?${query.toString()}`,
      { redirect: 'manual' },
    );
    keepCookies(page, jar);
    expect(page.status).toBe(200);
    const res = await fetch(formActionOf(base, await page.text()), {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: cookiesOf(jar), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ username: user.username, password: user.password }).toString(),
    });
    expect(res.status).toBe(302);
    const fragment = new URLSearchParams(new URL(res.headers.get('location')!).hash.slice(1));
    return fragment.get('access_token')!;
  }

  /** An organization whose API client's tokens live a minute: the realm's 300 s is its longest. */
  async function organization(): Promise<string> {
    const org = await createOrganization(['ws']);
    const admin = await createUser('master');
    const patched = await fetch(
      `${replica.url}/api/platform/organizations/${org}/token-lifetimes`,
      {
        method: 'PATCH',
        headers: { authorization: basicAuth(admin), 'content-type': 'application/json' },
        body: JSON.stringify({ access_token_lifespan: 60 }),
      },
    );
    expect(patched.status).toBe(200);
    return org;
  }

  it("refuses a disabled user's implicit-flow token past the realm's access-token lifetime", async () => {
    const org = await organization();
    const user = await createUser(org);
    // The client's own access-token lifetime does not apply to the implicit flow's tokens.
    const clientId = await createImplicitClient(org, { 'access.token.lifespan': '60' });
    const token = await implicitLogin(user, clientId);
    const claims = claimsOf(token);
    // Keycloak's implicit-flow lifetime, neither the client's 60 s nor the realm's 300 s.
    expect(Number(claims.exp) - Number(claims.iat)).toBe(900);
    await disable(user);
    expect(await status(org, token)).toBe(401);
    // Past the realm's access-token lifetime and the longest a cached Basic login is kept, the
    // token has five minutes left.
    clock.advance(10 * 60 * 1000);
    expect(await status(org, token)).toBe(401);
  });
});
