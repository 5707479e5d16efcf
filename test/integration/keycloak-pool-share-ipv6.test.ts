import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEYCLOAK_NODE_POOL } from '../../src/auth-proxy/auth-proxy.ts';
import { requestFrom, type AddressedResponse } from '../helpers/from-address.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/** The requests whose answers the front holds: marked, so that none of the gateway's own is. */
const HELD = /openid-configuration\?held$/;
/** From one /64: more than a Keycloak node's pool leaves anyone once the kept eighth is reached. */
const FLOOD = KEYCLOAK_NODE_POOL - 16;

/*
 * A Keycloak node's pool keeps its last eighth for clients holding less than an eighth: one
 * host is one client, and an IPv6 host, given a whole /64, that takes a new address of it for
 * each request still holds one share: its requests past it are refused 429 once only the kept
 * eighth is free (that another client still gets a place: test/unit/outbound/upstream.test.ts).
 * Clients are named by X-Forwarded-For from a trusted 127.0.0.1 (the IPv6 loopback is one
 * address); the real Keycloak answers through a front that holds the answers. Ports
 * 19350/19351.
 */
describe("one IPv6 /64's requests to a Keycloak node", () => {
  let front: KeycloakFront;
  let replica: Replica;
  let org: string;

  beforeAll(async () => {
    org = await createOrganization([]);
    front = await startKeycloakFront(testEnv().keycloakUrl);
    replica = await startReplica(19350, {
      KEYCLOAK_URL: front.url,
      TRUSTED_PROXIES: '127.0.0.1',
      AUTH_PROXY_TIMEOUT_MS: '120000',
    });
  });
  afterAll(async () => {
    // The held answers' connections are cut: the gateway answers them, nobody listens.
    await front?.close();
    await replica?.gateway.close();
    await closeTestDb();
  });

  const heldUrl = () => `${replica.url}/auth/realms/${org}/.well-known/openid-configuration?held`;

  it('holds one share for the whole /64: refused 429 once only the kept eighth is free', async () => {
    front.hold(HELD, 120_000);
    const answers: AddressedResponse[] = [];
    for (let i = 1; i <= FLOOD; i++) {
      const client = `2001:db8:1:2::${i.toString(16)}`;
      requestFrom('127.0.0.1', heldUrl(), {
        headers: { 'x-forwarded-for': client },
      }).then(
        (answer) => answers.push(answer),
        () => undefined,
      );
    }
    // Each request is either held at Keycloak's front or refused by the gateway.
    const held = () => front.seen.filter((seen) => HELD.test(seen.target)).length;
    await expect.poll(() => held() + answers.length, { timeout: 30_000 }).toBe(FLOOD);
    expect(answers.length).toBeGreaterThan(0);
    expect(answers.every(({ status }) => status === 429)).toBe(true);
    expect(answers[0]).toMatchObject({
      headers: { 'retry-after': '1' },
      json: { error: 'temporarily_unavailable' },
    });
    expect(held()).toBe(KEYCLOAK_NODE_POOL - KEYCLOAK_NODE_POOL / 8);
  }, 60_000);
});
