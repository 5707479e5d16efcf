import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { createUser, grantAtKeycloak, type TestUser } from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/** The token endpoint, whose answers the front holds: a Keycloak busy hashing passwords. */
const TOKEN = /\/protocol\/openid-connect\/token$/;
/** The replica's KEYCLOAK_TIMEOUT_MS. */
const TIMEOUT_MS = 2000;
/** How long the front holds each grant's answer: far past KEYCLOAK_TIMEOUT_MS. */
const HELD_MS = 12_000;
/** One organization's fleet of cold Basic logins: more than the gateway's connections to a node. */
const FLEET = 40;

/*
 * The gateway's own calls to one Keycloak node share one pool of connections. One
 * organization's fleet of Basic logins for distinct accounts, against a Keycloak slow to hash
 * passwords (the real Keycloak behind a TCP front that holds the token endpoint's answers),
 * must not hold every connection: another organization's first Bearer request (its key set
 * fetched) and its Basic login still get theirs, within KEYCLOAK_TIMEOUT_MS or at least with a
 * bound. Ports 19346/19347.
 */
describe("one organization's slow grants and everyone else's Keycloak calls", () => {
  let front: KeycloakFront;
  let replica: Replica;
  let fleetOrg: string;
  let otherOrg: string;
  let fleet: TestUser[];

  beforeAll(async () => {
    fleetOrg = await createOrganization(['ws1']);
    otherOrg = await createOrganization(['ws1']);
    fleet = await Promise.all(
      Array.from({ length: FLEET }, () => createUser(fleetOrg, { workspaceRoles: ['ws1'] })),
    );
    front = await startKeycloakFront(testEnv().keycloakUrl);
    replica = await startReplica(19346, {
      KEYCLOAK_URL: front.url,
      KEYCLOAK_TIMEOUT_MS: String(TIMEOUT_MS),
      AUTH_PROXY_TIMEOUT_MS: '30000',
      // A fleet logs in from many addresses: no address limit holds it back here either.
      LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
      BASIC_CACHE_MAX_SECONDS: '0',
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
    });
  });
  afterAll(async () => {
    front?.hold(TOKEN, 0);
    await replica?.gateway.close();
    await front?.close();
    await closeTestDb();
  });

  async function call(org: string, authorization: string): Promise<number> {
    const res = await fetch(`${replica.url}/api/${org}/platform/workspaces`, {
      headers: { authorization },
    });
    await res.body?.cancel();
    return res.status;
  }

  it("another organization's first Bearer request and Basic login are not queued behind the fleet's grants", async () => {
    const otherUser = await createUser(otherOrg, { workspaceRoles: ['ws1'] });
    const token = await grantAtKeycloak(otherUser);
    front.hold(TOKEN, HELD_MS);
    const logins = fleet.map((user) => call(fleetOrg, basicAuth(user)).catch(() => 0));
    // The fleet's grants have taken every connection the gateway lets them take.
    await expect
      .poll(() => front.seen.filter((seen) => TOKEN.test(seen.target)).length, {
        timeout: 10_000,
      })
      .toBeGreaterThanOrEqual(16);
    await new Promise((resolve) => setTimeout(resolve, 500));

    // The key set of the other organization's realm is fetched at once: a connection is left.
    let started = performance.now();
    expect(await call(otherOrg, `Bearer ${token}`)).toBe(200);
    expect(performance.now() - started).toBeLessThan(TIMEOUT_MS);

    // Its Basic login's grant is held as long as the fleet's, but it is sent at once, not after
    // the fleet's grants: answered once the front lets it through.
    started = performance.now();
    expect(await call(otherOrg, basicAuth(otherUser))).toBe(200);
    expect(performance.now() - started).toBeLessThan(HELD_MS + TIMEOUT_MS);

    // The fleet is served too, as connections free up.
    front.hold(TOKEN, 0);
    expect(new Set(await Promise.all(logins))).toEqual(new Set([200]));
  }, 120_000);
});
