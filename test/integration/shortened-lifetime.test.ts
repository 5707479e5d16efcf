import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import {
  claimsOf,
  createUser,
  passwordGrantBody,
  postToken,
  userIdOf,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * An administrator shortens the access-token lifetime through realmgate's API, then a user is
 * disabled: a token the user was issued before, under the former lifetime of a day, and never
 * shown to any replica yet, must stay refused until its own expiry, on the replica that took the
 * change, on the one that made the refusal, and on one started afterwards. No re-check
 * (REVOCATION_CHECK_SECONDS=off), so only the revocation list can refuse it; the replicas' clock
 * is moved past the new lifetime. Replicas share one Redis prefix. Ports 19996 (A), 19998 (B,
 * whose admin listener is 19999) and 19970 (C).
 */
describe('a refusal made after the lifetime was shortened lasts the former lifetime', () => {
  const clock = aheadClock();
  const shared = {
    REVOCATION_CHECK_SECONDS: 'off',
    REDIS_URL: testEnv().redisUrl,
    REDIS_KEY_PREFIX: `realmgate-shortened:${randomBytes(4).toString('hex')}:`,
  };
  let a: Replica;
  let b: Replica;
  let c: Replica | undefined;
  beforeAll(async () => {
    [a, b] = await Promise.all([
      startReplica(19996, shared, undefined, clock),
      startReplica(19998, shared, undefined, clock),
    ]);
  });
  afterAll(async () => {
    await Promise.all([a?.gateway.close(), b?.gateway.close(), c?.gateway.close()]);
    await closeTestDb();
  });

  async function status(replica: Replica, realm: string, token: string): Promise<number> {
    const res = await fetch(`${replica.url}/api/${realm}/platform/workspaces`, {
      headers: { authorization: `Bearer ${token}` },
    });
    return res.status;
  }

  it('refuses a day-long token never served before, on every replica, past the new lifetime', async () => {
    const org = await createOrganization(['ws']);
    const user = await createUser(org);
    const grant = await postToken(`${testEnv().publicUrl}/auth`, org, passwordGrantBody(user));
    expect(grant.status).toBe(200);
    const token = String(grant.json.access_token);
    const claims = claimsOf(token);
    expect(Number(claims.exp) - Number(claims.iat)).toBe(86400);

    // The API client's lifetime shortened to a minute on A: the realm's longest is now 900 s.
    const admin = await createUser('master');
    const patched = await fetch(`${a.url}/api/platform/organizations/${org}/token-lifetimes`, {
      method: 'PATCH',
      headers: { authorization: basicAuth(admin), 'content-type': 'application/json' },
      body: JSON.stringify({ access_token_lifespan: 60 }),
    });
    expect(patched.status).toBe(200);

    // The user disabled through B's admin listener, as the console does it.
    const login = await postToken(
      'http://127.0.0.1:19999/auth',
      'master',
      new URLSearchParams({
        client_id: 'admin-cli',
        grant_type: 'password',
        username: testEnv().keycloakAdminUsername,
        password: testEnv().keycloakAdminPassword,
      }).toString(),
    );
    const disabled = await fetch(
      `http://127.0.0.1:19999/auth/admin/realms/${org}/users/${await userIdOf(user)}`,
      {
        method: 'PUT',
        headers: {
          authorization: `Bearer ${String(login.json.access_token)}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify({ enabled: false }),
      },
    );
    expect(disabled.status).toBe(204);

    // Two hours on: past every lifetime the realm's settings give now, within the token's own.
    clock.advance(2 * 3600 * 1000);
    expect(await status(b, org, token)).toBe(401);
    expect(await status(a, org, token)).toBe(401);
    c = await startReplica(19970, shared, undefined, clock);
    expect(await status(c, org, token)).toBe(401);
  });
});
