import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, grantAtKeycloak, type TestUser } from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/** The token endpoint, whose answers the front holds: a Keycloak busy hashing passwords. */
const TOKEN = /\/protocol\/openid-connect\/token$/;
/** The replica's KEYCLOAK_TIMEOUT_MS: generous, the real Keycloak hashes the fleet's passwords. */
const TIMEOUT_MS = 5000;
/**
 * How long the front holds each grant's answer: far past KEYCLOAK_TIMEOUT_MS, and past the steps
 * the test takes while the fleet's grants are held.
 */
const HELD_MS = 30_000;
/** One organization's fleet of cold Basic logins: more than the gateway's connections to a node. */
const FLEET = 40;
/**
 * The fleet's grants in flight at most: keycloak-http.ts's 24 grant places, less the 3 kept for
 * realms holding fewer.
 */
const FLEET_PLACES = 21;

/*
 * The gateway's own calls to one Keycloak node share one pool of connections. One
 * organization's fleet of Basic logins for distinct accounts, against a Keycloak slow to hash
 * passwords (the real Keycloak behind a TCP front that holds the token endpoint's answers),
 * must not hold every connection: another organization's first Bearer request (its key set
 * fetched) and its Basic login still get theirs, sent while every grant of the fleet is still
 * held (an order the test reads at the front, not a time it measures). Ports 19346/19347.
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
      // The grants wait past HELD_MS: for the front, and the fleet's last for a place.
      AUTH_PROXY_TIMEOUT_MS: '120000',
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

  /** How many of `realm`'s requests to `endpoint` have reached Keycloak through the front. */
  const sentTo = (realm: string, endpoint: string) =>
    front.seen.filter((seen) =>
      seen.target.endsWith(`/realms/${realm}/protocol/openid-connect/${endpoint}`),
    ).length;

  it("another organization's first Bearer request and Basic login are not queued behind the fleet's grants", async () => {
    const otherUser = await createUser(otherOrg, { workspaceRoles: ['ws1'] });
    const token = await grantAtKeycloak(otherUser);
    front.hold(TOKEN, HELD_MS);
    let fleetAnswered = 0;
    const logins = fleet.map((user) =>
      call(fleetOrg, basicAuth(user))
        .catch(() => 0)
        .finally(() => (fleetAnswered += 1)),
    );
    /** The fleet logins answered when `realm`'s first request to `endpoint` reached Keycloak. */
    const fleetAnsweredWhenSent = (realm: string, endpoint: string) =>
      vi.waitFor(() => {
        expect(sentTo(realm, endpoint)).toBeGreaterThan(0);
        return fleetAnswered;
      }, EVENTUALLY);
    // The fleet's grants have taken every connection the gateway lets them take.
    await expect.poll(() => sentTo(fleetOrg, 'token'), EVENTUALLY).toBe(FLEET_PLACES);

    // The key set of the other organization's realm is fetched while every one of them is held
    // (answered by the front HELD_MS after Keycloak's answer): a connection is left.
    const bearer = call(otherOrg, `Bearer ${token}`);
    expect(await fleetAnsweredWhenSent(otherOrg, 'certs')).toBe(0);
    expect(await bearer).toBe(200);

    // Its Basic login's grant is held as long as the fleet's, but it is sent at once, not after
    // the fleet's grants: answered once the front lets it through.
    const login = call(otherOrg, basicAuth(otherUser));
    expect(await fleetAnsweredWhenSent(otherOrg, 'token')).toBe(0);
    expect(await login).toBe(200);

    // The fleet is served too, as connections free up.
    front.hold(TOKEN, 0);
    expect(new Set(await Promise.all(logins))).toEqual(new Set([200]));
  }, 240_000);
});
