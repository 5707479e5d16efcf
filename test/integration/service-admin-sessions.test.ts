import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeycloakCalls } from '../../src/keycloak/keycloak-calls.ts';
import { createServiceAdmin } from '../../src/keycloak/service-admin.ts';
import { uniqueId } from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * The gateway's service-account sessions (keycloak/service-admin.ts), one per realm, against the
 * real Keycloak through a front that counts its requests.
 */
describe("the service account's sessions, against the real Keycloak", () => {
  let front: KeycloakFront;

  beforeAll(async () => {
    front = await startKeycloakFront(testEnv().keycloakUrl);
  });

  afterAll(async () => {
    await front.close();
  });

  it('keeps a bounded number of realms: the least recently used makes way', async () => {
    const calls = createKeycloakCalls({ keycloakUrl: front.url, timeoutMs: 10_000 });
    const admin = createServiceAdmin({
      calls,
      clientSecret: testEnv().gatewayClientSecret,
      maxRealms: 3,
    });
    const masterLogins = () =>
      front.seen.filter((seen) =>
        seen.target.endsWith('/realms/master/protocol/openid-connect/token'),
      ).length;
    await admin.forRealm('master');
    await admin.forRealm('master');
    expect(masterLogins()).toBe(1);
    // Names no realm has, as a client could send: each is refused, none is kept for good.
    for (let i = 0; i < 5; i++) {
      await expect(admin.forRealm(uniqueId('made-up-'))).rejects.toThrow();
    }
    // Master's session made way for them: it logs in again, the map holds no more than 3.
    await admin.forRealm('master');
    expect(masterLogins()).toBe(2);
  });
});
