import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessTokenOf } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { claimsOf, createUser, keycloakAdmin } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * The request that finds its token due for a re-check waits for Keycloak's answer: a session
 * ended in Keycloak directly (its admin API on its own port, not through the gateway) is refused
 * on that very request, and then on the other replica too. The wait bound and the outage cases
 * are shown on an injected clock in test/unit/auth/active-check.test.ts.
 */
describe('a due re-check (REVOCATION_CHECK_SECONDS=1, two replicas)', () => {
  // Both replicas' time: the test moves it past the interval.
  const clock = aheadClock();
  let pair: [Replica, Replica];
  beforeAll(async () => {
    const shared = {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}recheck-${randomBytes(4).toString('hex')}:`,
      REVOCATION_CHECK_SECONDS: '1',
      // Not what this file tests (test/unit/auth/bearer/active-check.test.ts bounds the wait): on
      // a loaded machine Keycloak's answer may take over the 1 s default, and the request is served.
      REVOCATION_CHECK_WAIT_MS: '30000',
    };
    pair = [
      await startReplica(18720, shared, undefined, clock),
      await startReplica(18722, shared, undefined, clock),
    ];
  });
  afterAll(async () => {
    await Promise.all(pair.map((replica) => replica.gateway.close()));
    await closeTestDb();
  });

  /** Status and message of `GET path` on `replica`. */
  async function answer(replica: Replica, path: string, token: string) {
    const res = await fetch(`${replica.url}${path}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    const body = (await res.json()) as { message: string };
    return { status: res.status, message: body.message };
  }

  /** The replica's re-check events so far. */
  async function rechecks(replica: Replica): Promise<Record<string, number>> {
    const url = `http://127.0.0.1:${replica.config.ADMIN_PORT}/metrics`;
    const text = await (await fetch(url)).text();
    const counts: Record<string, number> = {};
    for (const [, event, count] of text.matchAll(
      /^realmgate_token_rechecks_total\{event="(\w+)"\} (\d+)/gm,
    )) {
      counts[event!] = Number(count);
    }
    return counts;
  }

  it('refuses a token whose session was deleted in Keycloak on the request that finds it due', async () => {
    const org = await createOrganization(['ws-a']);
    const user = await createUser(org, { workspaceRoles: ['ws-a'] });
    const token = await accessTokenOf(user);
    const path = `/api/${org}/platform/workspaces`;
    const [replica, other] = pair;

    // The first request waits for the first re-check: active.
    expect((await answer(replica, path, token)).status).toBe(200);
    const before = await rechecks(replica);

    const admin = await keycloakAdmin();
    await admin.realms.deleteSession({
      realm: org,
      session: String(claimsOf(token).sid),
      isOffline: false,
    });
    // The re-check falls due 1 s after the last.
    clock.advance(1100);

    // The request that finds it due is refused itself, not served ahead of Keycloak's answer.
    expect(await answer(replica, path, token)).toEqual({
      status: 401,
      message: 'Token is no longer active.',
    });
    const after = await rechecks(replica);
    expect((after.queued ?? 0) - (before.queued ?? 0)).toBe(1);
    expect((after.inactive ?? 0) - (before.inactive ?? 0)).toBe(1);
    expect((after.late ?? 0) - (before.late ?? 0)).toBe(0);
    // Its session is revoked on the other replica too.
    await expect.poll(async () => (await answer(other, path, token)).status, EVENTUALLY).toBe(401);
  });
});
