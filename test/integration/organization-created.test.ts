import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, callApi } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, uniqueId } from '../helpers/keycloak.ts';
import { closeTestDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { manualClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/** The most the configuration allows (5 minutes): far more than the test lasts. */
const STOPPED_CLOCK_LEEWAY = '300';

/**
 * An organization created through the API is served at once where it was created, and on the
 * other replicas as soon as the change reaches them over Redis, although each had just looked
 * its id up and found it absent. Both replicas' clocks stand still: an absent id's 404 never
 * runs out on its own, so only being told of the creation serves it. Ports 19740-19743.
 *
 * Keycloak's clock runs on meanwhile: the administrator's Basic login, made at the create, gets
 * a token issued after the replicas' clocks stopped. Their leeway on a token's `iat` covers the
 * test's length; with the replicas' usual second, a start and two lookups that took longer on a
 * loaded machine had the login refused ("Token issued in the future", 401).
 */
describe('an organization created after its id was looked up', () => {
  let creating: Replica;
  let other: Replica;
  let admin: string;

  beforeAll(async () => {
    admin = basicAuth(await createUser('master'));
    // A channel of their own: no other suite's changes reach them.
    const shared = {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `realmgate-created:${randomBytes(4).toString('hex')}:`,
      TOKEN_CLOCK_LEEWAY_SECONDS: STOPPED_CLOCK_LEEWAY,
    };
    creating = await startReplica(19740, shared, undefined, manualClock(Date.now()));
    other = await startReplica(19742, shared, undefined, manualClock(Date.now()));
  });

  afterAll(async () => {
    await creating?.gateway.close();
    await other?.gateway.close();
    await closeTestDb();
  });

  it('is served by the next request on the replica that created it, and on the others once told', async () => {
    const org = uniqueId('org-');
    // No credentials: 404 while the organization is absent, 401 once it is found.
    const status = async (replica: Replica) =>
      (await fetch(`${replica.url}/api/${org}/platform/workspaces`)).status;
    expect([await status(creating), await status(other)]).toEqual([404, 404]);

    const created = await callApi('/api/platform/organizations', admin, {
      method: 'POST',
      body: { id: org, name: 'Created' },
      base: creating.url,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(200);

    expect(await status(creating)).toBe(401);
    // The other replica learns it over Redis: as soon as the message arrives.
    await expect.poll(() => status(other), EVENTUALLY).toBe(401);
  });
});
