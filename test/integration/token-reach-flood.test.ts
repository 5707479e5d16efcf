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
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
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
});
