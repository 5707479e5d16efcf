import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/** BASIC_CACHE_MAX_SECONDS of the replica: the clock is moved past it to re-check a login. */
const CACHE_SECONDS = 2;
const TOKEN_PATH = /\/protocol\/openid-connect\/token$/;

/**
 * A Keycloak slow to grant but answering its health probe is not down, yet a re-check of a
 * cached Basic login that times out serves the login kept for an outage. It costs one request's
 * wait: for as long as that grant waited, the kept logins are served without another grant.
 */
describe('a Basic login while Keycloak is slow to grant', () => {
  const clock = aheadClock();
  let front: KeycloakFront;
  let replica: Replica;
  let org: string;

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    front = await startKeycloakFront(testEnv().keycloakUrl);
    replica = await startReplica(
      18250,
      {
        KEYCLOAK_URL: front.url,
        BASIC_CACHE_MAX_SECONDS: String(CACHE_SECONDS),
        BASIC_OUTAGE_MAX_SECONDS: '600',
        // The grant's timeout: short, so the first re-check's wait is short too.
        AUTH_PROXY_TIMEOUT_MS: '2500',
        LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
        REDIS_URL: testEnv().redisUrl,
        REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}slow-${randomBytes(4).toString('hex')}:`,
        REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
      },
      undefined,
      clock,
    );
  });
  afterAll(async () => {
    front?.hold(TOKEN_PATH, 0);
    await replica?.gateway.close();
    await front?.close();
    await closeTestDb();
  });

  async function statusOf(user: TestUser, organization = org): Promise<number> {
    const res = await fetch(`${replica.url}/api/${organization}/platform/workspaces`, {
      headers: { authorization: basicAuth(user) },
    });
    await res.body?.cancel();
    return res.status;
  }

  const grantsSeen = () => front.seen.filter((request) => TOKEN_PATH.test(request.target)).length;

  it('serves the kept login after a timed-out re-check without asking Keycloak again at once', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    expect(await statusOf(user)).toBe(200);
    // Keycloak's grants answer long after the grant's timeout; its health probe at once.
    front.hold(TOKEN_PATH, 60_000);
    clock.advance(CACHE_SECONDS * 1000 + 300);
    const before = grantsSeen();
    expect(await statusOf(user)).toBe(200);
    expect(grantsSeen()).toBeGreaterThan(before);
    const afterFirst = grantsSeen();
    expect(await statusOf(user)).toBe(200);
    expect(await statusOf(user)).toBe(200);
    expect(grantsSeen()).toBe(afterFirst);
  });

  it("pauses the re-checks of the slow realm's kept logins only, not another realm's", async () => {
    front.hold(TOKEN_PATH, 0);
    const other = await createOrganization(['ws1']);
    const slow = await createUser(org, { workspaceRoles: ['ws1'] });
    const quick = await createUser(other, { workspaceRoles: ['ws1'] });
    expect(await statusOf(slow)).toBe(200);
    expect(await statusOf(quick, other)).toBe(200);
    front.hold(new RegExp(`/realms/${org}/protocol/openid-connect/token$`), 60_000);
    clock.advance(CACHE_SECONDS * 1000 + 300);
    // The slow realm's re-check times out: its kept login is served, its re-checks paused.
    expect(await statusOf(slow)).toBe(200);
    // The other realm's Keycloak grants at once: its login past its cache bound is verified.
    const quickGrants = () =>
      front.seen.filter(({ target }) =>
        target.endsWith(`/realms/${other}/protocol/openid-connect/token`),
      ).length;
    const before = quickGrants();
    expect(await statusOf(quick, other)).toBe(200);
    expect(quickGrants()).toBe(before + 1);
    front.hold(TOKEN_PATH, 0);
  });
});
