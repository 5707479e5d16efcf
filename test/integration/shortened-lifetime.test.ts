import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import {
  claimsOf,
  createUser,
  passwordGrantBody,
  postToken,
  userIdOf,
} from '../helpers/keycloak.ts';
import {
  adminUrlOf,
  bearerStatus,
  consoleToken,
  replicasWithoutRecheck,
  setLifetimeThroughAdminListener,
  setLifetimeThroughGateway,
} from '../helpers/lifetime-suite.ts';
import { createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * An administrator shortens the access-token lifetime (through realmgate's API, or in Keycloak
 * through the admin listener, as the console does), then a user is disabled: a token the user was
 * issued before, under the former lifetime of a day, and never shown to any replica yet, must stay
 * refused until its own expiry, on the replica that took the change, on the one that made the
 * refusal, and on one started afterwards. No re-check, so only the revocation list can refuse it;
 * the replicas' clock is moved past the new lifetime. Replicas share one Redis prefix. Ports
 * 19996 (A), 19998 (B), and 19970 and 19972 (C, started late, one per test).
 */
describe('a refusal made after the lifetime was shortened lasts the former lifetime', () => {
  const settings = {
    REDIS_URL: testEnv().redisUrl,
    REDIS_KEY_PREFIX: `realmgate-shortened:${randomBytes(4).toString('hex')}:`,
  };
  const { clock, replica } = replicasWithoutRecheck([19996, 19998], () => settings);
  const late: Replica[] = [];
  afterAll(async () => {
    await Promise.all(late.map((c) => c.gateway.close()));
  });

  const status = (on: Replica, realm: string, token: string) =>
    bearerStatus(on, `/api/${realm}/platform/workspaces`, token);

  /**
   * A day-long token issued, the API client's lifetime shortened to a minute on A by `shorten`
   * (the realm's longest is then 900 s), the user disabled through B's admin listener: the token
   * is refused on A, B and a replica C started at `latePort`, two hours on.
   */
  async function refusedPastTheNewLifetime(
    shorten: (on: Replica, org: string, seconds: number) => Promise<void>,
    latePort: number,
  ): Promise<void> {
    const [a, b] = [replica(0), replica(1)];
    const org = await createOrganization(['ws']);
    const user = await createUser(org);
    const grant = await postToken(`${testEnv().publicUrl}/auth`, org, passwordGrantBody(user));
    expect(grant.status).toBe(200);
    const token = String(grant.json.access_token);
    const claims = claimsOf(token);
    expect(Number(claims.exp) - Number(claims.iat)).toBe(86400);

    await shorten(a, org, 60);

    // The user disabled through B's admin listener, as the console does it.
    const disabled = await fetch(
      `${adminUrlOf(b)}/auth/admin/realms/${org}/users/${await userIdOf(user)}`,
      {
        method: 'PUT',
        headers: {
          authorization: `Bearer ${await consoleToken(b)}`,
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
    const c = await startReplica(
      latePort,
      { REVOCATION_CHECK_SECONDS: 'off', ...settings },
      undefined,
      clock,
    );
    late.push(c);
    expect(await status(c, org, token)).toBe(401);
  }

  it('refuses a day-long token never served before, on every replica, past the new lifetime', async () => {
    await refusedPastTheNewLifetime(setLifetimeThroughGateway, 19970);
  });

  it('does so as well when the lifetime is shortened in Keycloak through the admin listener', async () => {
    await refusedPastTheNewLifetime(setLifetimeThroughAdminListener, 19972);
  });

  it('tells the replicas nothing of a change Keycloak refuses (no credentials, no such realm)', async () => {
    // Anyone who reaches the admin listener may send these: each would have every replica keep
    // a lifetime for a day, in Redis and in memory, for a realm named at will.
    const realm = `made-up-${randomBytes(4).toString('hex')}`;
    const refused = await fetch(`${adminUrlOf(replica(0))}/auth/admin/realms/${realm}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ accessTokenLifespan: 60 }),
    });
    await refused.arrayBuffer();
    expect(refused.status).toBe(401);
    // A change Keycloak takes, after it: its lifetime is kept before its answer, as the refused
    // one's was before this fix, and that one's close long over.
    const org = await createOrganization(['ws']);
    await setLifetimeThroughAdminListener(replica(0), org, 60);
    const redis = new Redis(testEnv().redisUrl);
    try {
      const kept = (prefix: string) =>
        redis.keys(`${settings.REDIS_KEY_PREFIX}revoked:${prefix}:*`);
      expect(await kept(org)).not.toEqual([]);
      expect(await kept(realm)).toEqual([]);
    } finally {
      redis.disconnect();
    }
  });
});
