import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  REDIRECT_URI,
  authorizeUrl,
  cookieHeaderOf,
  createBrowserClient,
  formActionOf,
} from '../helpers/browser-login.ts';
import { claimsOf, createUser, keycloakAdmin, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * The re-check (REVOCATION_CHECK_SECONDS) asks Keycloak about every Bearer token the gateway
 * serves, whichever client of the realm it was issued to: a browser client's token (the
 * authorization-code flow, as a single-page app's users hold) is served past its re-checks while
 * its session lives, and refused at the re-check after its session was ended in Keycloak.
 */
describe('the re-check of a token issued to a browser client of the realm', () => {
  const clock = aheadClock();
  let replica: Replica;
  beforeAll(async () => {
    replica = await startReplica(
      18740,
      {
        REDIS_URL: testEnv().redisUrl,
        REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}recheck-browser-${randomBytes(4).toString('hex')}:`,
        REVOCATION_CHECK_SECONDS: '1',
      },
      undefined,
      clock,
    );
  });
  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  /** An authorization-code login of `clientId` through the replica: the access token. */
  async function browserToken(user: TestUser, clientId: string): Promise<string> {
    const page = await fetch(authorizeUrl(replica.url, user.realm, clientId));
    expect(page.status).toBe(200);
    const login = await fetch(formActionOf(replica.url, await page.text()), {
      method: 'POST',
      redirect: 'manual',
      headers: {
        cookie: cookieHeaderOf(page.headers.getSetCookie()),
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ username: user.username, password: user.password }).toString(),
    });
    expect(login.status).toBe(302);
    const code = new URL(login.headers.get('location')!).searchParams.get('code')!;
    const res = await fetch(
      `${replica.url}/auth/realms/${user.realm}/protocol/openid-connect/token`,
      {
        method: 'POST',
        body: new URLSearchParams({
          client_id: clientId,
          grant_type: 'authorization_code',
          code,
          redirect_uri: REDIRECT_URI,
        }),
      },
    );
    const json = (await res.json()) as Record<string, string>;
    expect(res.status).toBe(200);
    return json.access_token!;
  }

  async function answer(path: string, token: string) {
    const res = await fetch(`${replica.url}${path}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const body = (await res.json()) as { message?: string };
    return { status: res.status, message: body.message };
  }

  it('is served past its re-checks while its session lives, refused once the session is ended in Keycloak', async () => {
    const org = await createOrganization(['ws']);
    const app = await createBrowserClient(org);
    const user = await createUser(org);
    const token = await browserToken(user, app);
    const path = `/api/${org}/platform/workspaces`;

    // The first request waits for the first re-check; the next ones after the interval too.
    // Keycloak answers an introspection active:false when the asking client (the gateway's) is
    // not in the token's audience, so the realm must put it there for every client's tokens.
    expect(await answer(path, token)).toMatchObject({ status: 200 });
    clock.advance(1100);
    expect(await answer(path, token)).toMatchObject({ status: 200 });

    const admin = await keycloakAdmin();
    await admin.realms.deleteSession({
      realm: org,
      session: String(claimsOf(token).sid),
      isOffline: false,
    });
    clock.advance(1100);
    expect(await answer(path, token)).toEqual({
      status: 401,
      message: 'Token is no longer active.',
    });
  });
});
