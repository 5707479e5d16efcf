import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { createUser, keycloakAdmin, userIdOf, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock, type TestClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';

// A password changed while a Basic login is cached on two replicas sharing Redis. Changed in
// Keycloak directly, the gateway never sees it: the old password keeps working until the
// cached login's `BASIC_CACHE_MAX_SECONDS` runs out, then on no replica. Changed through
// realmgate's API on one replica, the other refuses the old password at once.

/** Two replicas sharing Redis and one cache secret, as deployed: they share cached logins. */
async function startPair(
  port: number,
  settingsA: Record<string, string>,
  settingsB: Record<string, string>,
  clock?: TestClock,
): Promise<[Replica, Replica]> {
  const shared = {
    REDIS_URL: testEnv().redisUrl,
    REDIS_KEY_PREFIX: testEnv().redisKeyPrefix,
    REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
  };
  const a = await startReplica(port, { ...shared, ...settingsA }, undefined, clock);
  const b = await startReplica(port + 2, { ...shared, ...settingsB }, undefined, clock);
  return [a, b];
}

/** The replica's answer to an API call with `user`'s Basic credentials. */
async function statusOf(replica: Replica, user: TestUser): Promise<number> {
  const res = await fetch(`${replica.url}/api/${user.realm}/platform/workspaces`, {
    headers: { authorization: basicAuth(user) },
  });
  await res.arrayBuffer();
  return res.status;
}

let org: string;
beforeAll(async () => {
  org = await createOrganization(['ws']);
});
afterAll(closeTestDb);

describe('a password changed in Keycloak directly', () => {
  // Never waited out (the clock is moved past it): long enough that the admin call setting the
  // password ends well inside it, even on a loaded machine.
  const BASIC_CACHE_MAX_SECONDS = 60;
  // Both replicas run on one clock the test moves past the bound instead of waiting it out.
  const clock = aheadClock();
  let a: Replica;
  let b: Replica;
  beforeAll(async () => {
    const bound = { BASIC_CACHE_MAX_SECONDS: String(BASIC_CACHE_MAX_SECONDS) };
    [a, b] = await startPair(19460, bound, bound, clock);
  });
  afterAll(async () => {
    await Promise.all([a?.gateway.close(), b?.gateway.close()]);
  });

  it('keeps the old password within BASIC_CACHE_MAX_SECONDS, then refuses it on both replicas', async () => {
    const user = await createUser(org);
    // Ready before the first login: only the password reset itself runs inside the bound.
    const admin = await keycloakAdmin(); // Keycloak's own port: the gateway sees nothing
    const id = await userIdOf(user);
    expect(await statusOf(a, user)).toBe(200);
    // Keycloak verified the login no later than now: its cache deadline is at most a bound away.
    const verifiedBy = Date.now();
    expect(await statusOf(b, user)).toBe(200);

    const newPassword = `${user.password}-new`;
    await admin.users.resetPassword({
      realm: org,
      id,
      credential: { type: 'password', value: newPassword, temporary: false },
    });
    expect(Date.now() - verifiedBy).toBeLessThan(BASIC_CACHE_MAX_SECONDS * 1000);
    // Within the bound the cached login still serves the old password: the documented lag.
    expect(await statusOf(a, user)).toBe(200);
    expect(await statusOf(b, user)).toBe(200);

    clock.advance(verifiedBy + BASIC_CACHE_MAX_SECONDS * 1000 + 250 - Date.now());
    expect(await statusOf(a, user)).toBe(401);
    expect(await statusOf(b, user)).toBe(401);
    const renewed = { ...user, password: newPassword };
    expect(await statusOf(a, renewed)).toBe(200);
    expect(await statusOf(b, renewed)).toBe(200);
  });
});

describe("a password changed through realmgate's API", () => {
  let a: Replica;
  let b: Replica;
  let asAdmin: string;
  beforeAll(async () => {
    // B keeps Basic logins an hour: only what A shares can make it refuse the old password.
    [a, b] = await startPair(19470, {}, { BASIC_CACHE_MAX_SECONDS: '3600' });
    asAdmin = basicAuth(await createUser('master'));
  });
  afterAll(async () => {
    await Promise.all([a?.gateway.close(), b?.gateway.close()]);
  });

  /** Sets a new password for `user` through replica A's users API: the new password. */
  async function changePassword(user: TestUser): Promise<string> {
    const newPassword = `${user.password}-new`;
    const res = await fetch(
      `${a.url}/api/platform/organizations/${org}/users/${user.username}/password`,
      {
        method: 'PUT',
        headers: { authorization: asAdmin, 'content-type': 'application/json' },
        body: JSON.stringify({ password: newPassword }),
      },
    );
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    return newPassword;
  }

  it('refuses the old password at once on the other replica', async () => {
    const user = await createUser(org);
    expect(await statusOf(a, user)).toBe(200);
    expect(await statusOf(b, user)).toBe(200);

    const newPassword = await changePassword(user);

    expect(await statusOf(a, user)).toBe(401);
    // A shares the change through Redis as it answers; B applies it as the message arrives.
    await expect.poll(() => statusOf(b, user), EVENTUALLY).toBe(401);
    expect(await statusOf(b, { ...user, password: newPassword })).toBe(200);
  });

  it('keeps refusing the old password after a session of the user ends later', async () => {
    const user = await createUser(org);
    // Logged in on B first: the shared cached login has B's hour, not A's minute.
    expect(await statusOf(b, user)).toBe(200);
    expect(await statusOf(a, user)).toBe(200);
    const newPassword = await changePassword(user);
    await expect.poll(() => statusOf(b, user), EVENTUALLY).toBe(401);

    // The user signs in with the new password and signs that session out through A.
    const oidc = `${a.url}/auth/realms/${org}/protocol/openid-connect`;
    const client = apiClientIdOf(org);
    const grant = (await (
      await fetch(`${oidc}/token`, {
        method: 'POST',
        body: new URLSearchParams({
          client_id: client,
          grant_type: 'password',
          scope: 'openid',
          username: user.username,
          password: newPassword,
        }),
      })
    ).json()) as { access_token: string; refresh_token: string };
    const bearer = async (replica: Replica) => {
      const answer = await fetch(`${replica.url}/api/${org}/platform/workspaces`, {
        headers: { authorization: `Bearer ${grant.access_token}` },
      });
      await answer.arrayBuffer();
      return answer.status;
    };
    expect(await bearer(b)).toBe(200);
    const logout = await fetch(`${oidc}/logout`, {
      method: 'POST',
      body: new URLSearchParams({ client_id: client, refresh_token: grant.refresh_token }),
    });
    expect(logout.status).toBe(204);
    await logout.arrayBuffer();
    // B has applied the session's end.
    await expect.poll(() => bearer(b), EVENTUALLY).toBe(401);

    // The old password is still refused on both, the new one served.
    expect(await statusOf(a, user)).toBe(401);
    expect(await statusOf(b, user)).toBe(401);
    expect(await statusOf(b, { ...user, password: newPassword })).toBe(200);
  });
});
