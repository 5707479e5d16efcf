import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestFrom } from '../helpers/from-address.ts';
import {
  claimsOf,
  createUser,
  madeUpToken,
  passwordGrantBody,
  postToken,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { manualClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * Anyone can send tokens naming made-up sessions to `/auth`: four a request. The reach step
 * (token-reach-guard.ts) looks up the session of an access token its realm signed only, on its
 * sender's share of the replica's lookups, and a refresh grant's only once Keycloak accepted its
 * refresh token (job-credentials.ts): a forged token costs no lookup and nothing of it goes to
 * the shared cache (Redis), whatever its sender, and a fleet's refresh grants from one address
 * are served whatever the lookups left. A real job credential's reach is still looked up, held,
 * and shared. The replica's clock stands still, so no lookup comes back with time. Ports
 * 21330/21331.
 */
describe('a flood of made-up sessions on /auth', () => {
  const prefix = `reachflood-${randomBytes(3).toString('hex')}:`;
  let replica: Replica;
  let redis: Redis;
  let org: string;

  beforeAll(async () => {
    org = await createOrganization(['ws1'], 1);
    replica = await startReplica(
      21330,
      {
        REDIS_URL: testEnv().redisUrl,
        REDIS_KEY_PREFIX: prefix,
        REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
      },
      undefined,
      manualClock(Date.now()),
    );
    redis = new Redis(testEnv().redisUrl);
  });

  afterAll(async () => {
    redis?.disconnect();
    await replica?.gateway.close();
    await closeTestDb();
  });

  const reachKeys = async () => (await redis.keys(`${prefix}token-reach:*`)).sort();

  it('spends no lookup on forged access tokens, shares no made-up session, and still holds a real token to its reach', async () => {
    const account = `${replica.url}/auth/realms/${org}/account/`;
    const forged = () =>
      madeUpToken({ typ: 'Bearer', sid: `made-up-${randomBytes(6).toString('hex')}` });
    const sendFrom127002 = (requests: number) =>
      Promise.all(
        Array.from({ length: requests }, () =>
          requestFrom('127.0.0.2', account, {
            headers: {
              authorization: `Bearer ${[forged(), forged(), forged(), forged()].join(', ')}`,
            },
          }),
        ),
      );
    // 700 made-up sessions, four a request: past what the replica looks up in a second (500),
    // were they looked up. No realm signed them: each goes on to Keycloak, unlooked-up, which
    // answers as to a request with no token (the account console's page), none a 503.
    const flood = await sendFrom127002(175);
    expect(new Set(flood.map(({ status }) => status))).toEqual(new Set([200]));
    expect(await reachKeys()).toEqual([]);

    // A read-only job credential issued elsewhere: the replica has not read its reach yet.
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const body = passwordGrantBody(user, '&realmgate_name=flood-job&realmgate_read_only=true');
    const issued = await postToken(`${testEnv().publicUrl}/auth`, org, body);
    expect(issued.status).toBe(200);
    const token = String(issued.json.access_token);
    const write = await requestFrom('127.0.0.1', account, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect([write.status, write.json.error]).toEqual([403, 'insufficient_scope']);
    // Its reach, found, is shared as before.
    expect(await reachKeys()).toEqual([`${prefix}token-reach:${String(claimsOf(token).sid)}`]);
  });

  it('serves a fleet refreshing together from one address, more sessions than its share of the lookups, and still ends an expired one', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const issue = async (extra = '') => {
      const issued = await postToken(
        `${testEnv().publicUrl}/auth`,
        org,
        passwordGrantBody(user, extra),
      );
      expect(issued.status).toBe(200);
      return String(issued.json.refresh_token);
    };
    // 120 jobs' sessions (a client's own lookups are 100), issued elsewhere, ten at a time.
    const fleet: string[] = [];
    while (fleet.length < 120)
      fleet.push(...(await Promise.all(Array.from({ length: 10 }, () => issue()))));
    // One more, a job credential whose lifetime is over as far as its record says.
    const late = await issue('&realmgate_name=burst-late&realmgate_expires_in=60');
    await testDb()
      .table('refresh_token_details')
      .where({ session_id: String(claimsOf(late).sid) })
      // Before the replica's clock, which stands still since it started.
      .update({ expires_at: new Date(Date.now() - 3_600_000) });
    const token = `${replica.url}/auth/realms/${org}/protocol/openid-connect/token`;
    const refresh = (refreshToken: string) =>
      requestFrom('127.0.0.3', token, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `client_id=_${org}-api&grant_type=refresh_token&refresh_token=${refreshToken}`,
      });
    // The same address's made-up refresh tokens first: Keycloak refuses them, and they spend no
    // lookup (the clock stands still: one spent would not come back).
    // A hundred at a time: more at once from one address would be past its share of Keycloak's
    // connections (429, security-model.md "Slow clients").
    const forged = new Set<number>();
    for (let batch = 0; batch < 5; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 100 }, (_, i) =>
          refresh(madeUpToken({ typ: 'Refresh', sid: `made-up-${batch}-${i}`, sub: 'x' })),
        ),
      );
      for (const { status } of answers) forged.add(status);
    }
    // The fleet at once, from the same address: every one served.
    const [ended, ...served] = await Promise.all([late, ...fleet].map(refresh));
    expect(served.map(({ status }) => status)).toEqual(fleet.map(() => 200));
    // Keycloak's refusal of each made-up one.
    expect(forged).toEqual(new Set([400]));
    // The expired one's reach, looked up once Keycloak accepted it: refused as Keycloak refuses
    // an expired token, no token handed out.
    expect([ended!.status, ended!.json.error]).toEqual([400, 'invalid_grant']);
    expect(ended!.json.access_token).toBeUndefined();
  });
});
