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
 * The `/auth` reach step reads a token's session unverified (token-reach-guard.ts), so anyone
 * can name made-up sessions: four a request, each a database lookup the first time a replica
 * sees it. Such lookups are spent from the sender's share of the replica's, as the
 * organization directory's are (organization-flood.test.ts), and a session the database has no
 * record of is remembered by the replica alone: nothing of it goes to the shared cache (Redis).
 * A real job credential's reach is still looked up from another address, held, and shared. The
 * replica's clock stands still, so no lookup comes back with time. Ports 21330/21331.
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

  it("spends the sender's lookups only, shares no made-up session, and still holds a real token to its reach", async () => {
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
    // A host's hundred jobs refreshing together (a session each, four a request): all served.
    const jobs = await sendFrom127002(25);
    expect(jobs.filter(({ status }) => status === 503)).toEqual([]);
    // 600 more: past what the replica looks up in a second (500).
    const flood = await sendFrom127002(150);
    // Past the sender's lookups (and what it may take of the others'), 503: the database was
    // not asked, so the reach is unknown, not "none".
    const refused = flood.filter(({ status }) => status === 503);
    expect(refused.length).toBeGreaterThan(0);
    expect(refused[0]).toMatchObject({
      headers: { 'retry-after': '1' },
      json: { error: 'temporarily_unavailable' },
    });
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
