import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, type TestUser } from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

const TOKEN_PATH = /\/protocol\/openid-connect\/token$/;

/**
 * Identical Basic logins in flight at once share one attempt, but only from one address group:
 * the attempt carries its address's throttle decision, which is not another host's.
 */
describe('identical Basic logins from two hosts at once', () => {
  let front: KeycloakFront;
  let replica: Replica;
  let org: string;

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    front = await startKeycloakFront(testEnv().keycloakUrl);
    replica = await startReplica(18260, {
      KEYCLOAK_URL: front.url,
      // The tests speak for several hosts through X-Forwarded-For from a trusted 127.0.0.1.
      TRUSTED_PROXIES: '127.0.0.1',
      LOGIN_MAX_FAILURES_PER_ADDRESS: '1',
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}flight-${randomBytes(4).toString('hex')}:`,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
    });
  });
  afterAll(async () => {
    await replica?.gateway.close();
    await front?.close();
    await closeTestDb();
  });

  async function statusOf(user: TestUser, address: string, password = user.password) {
    const res = await fetch(`${replica.url}/api/${org}/platform/workspaces`, {
      headers: { authorization: basicAuth({ ...user, password }), 'x-forwarded-for': address },
    });
    await res.body?.cancel();
    return res.status;
  }

  /** Basic logins not found cached so far: each starts (or joins) an attempt at once. */
  async function basicMisses(): Promise<number> {
    const res = await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/metrics`);
    const line = (await res.text())
      .split('\n')
      .find(
        (text) =>
          text.startsWith('realmgate_cache_lookups_total{') &&
          text.includes('cache="basic_login"') &&
          text.includes('result="miss"'),
      );
    return line === undefined ? 0 : Number(line.split(' ').at(-1));
  }

  it("gives a host not throttled its own login, not the throttled host's 429", async () => {
    const [user, other] = [await createUser(org), await createUser(org)];
    // Host A's one failure allowed is in flight (its grant held at the front): A's next
    // attempt waits for it, and is refused once it fails.
    const held = front.gate(TOKEN_PATH);
    const failing = statusOf(other, '203.0.113.10', 'wrong-password');
    await held.reached;
    const missesBefore = await basicMisses();
    const fromA = statusOf(user, '203.0.113.10');
    await vi.waitFor(async () => expect(await basicMisses()).toBe(missesBefore + 1), EVENTUALLY);
    // Host B sends the same credentials meanwhile.
    const fromB = statusOf(user, '198.51.100.20');
    await vi.waitFor(async () => expect(await basicMisses()).toBe(missesBefore + 2), EVENTUALLY);
    held.open();
    expect(await failing).toBe(401);
    expect(await fromA).toBe(429);
    expect(await fromB).toBe(200);
  });
});
