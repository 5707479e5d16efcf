import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, passwordGrantBody, postToken, type TestUser } from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { recordNodeChanges } from '../helpers/node-changes.ts';

/** The token endpoint, whose answers the fronts hold: a Keycloak busy hashing passwords. */
const TOKEN = /\/protocol\/openid-connect\/token$/;
/**
 * The replica's KEYCLOAK_TIMEOUT_MS: every held grant below takes longer. It also bounds the
 * probe of the real Keycloak a late grant sets off: a few seconds, so that a probe slowed by a
 * loaded machine still finds a busy node up.
 */
const TIMEOUT_MS = 3000;

/*
 * A busy Keycloak is not a down one (a fleet's burst of right logins, bench/results.md "The
 * fleet"): the real Keycloak behind two TCP fronts (KEYCLOAK_URL lists both), which hold the
 * token endpoint's answers longer than KEYCLOAK_TIMEOUT_MS. A Basic login's grant has the bound
 * of the same grant through /auth (AUTH_PROXY_TIMEOUT_MS); a login the throttle holds behind
 * one in flight gets its answer when that one ends; a node that answers its probe stays in; a
 * node that answers nothing still goes down. Ports 18960/18961.
 */
describe('logins behind a slow Keycloak', () => {
  const fronts: KeycloakFront[] = [];
  let replica: Replica;
  let org: string;
  /** The replica's log lines about node states. */
  const { logger, nodeChanges } = recordNodeChanges();

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    for (let i = 0; i < 2; i++) fronts.push(await startKeycloakFront(testEnv().keycloakUrl));
    replica = await startReplica(
      18960,
      {
        KEYCLOAK_URL: fronts.map((front) => front.url).join(','),
        KEYCLOAK_TIMEOUT_MS: String(TIMEOUT_MS),
        AUTH_PROXY_TIMEOUT_MS: '20000',
        // One login of an account from one address in flight at a time: the next one waits.
        LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS: '1',
        LOGIN_MAX_FAILURES_PER_ADDRESS: '0',
        BASIC_CACHE_MAX_SECONDS: '0',
        REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
      },
      logger,
    );
  });
  afterAll(async () => {
    await replica?.gateway.close();
    for (const front of fronts) await front.close();
    await closeTestDb();
  });

  const member = () => createUser(org, { workspaceRoles: ['ws1'] });

  async function basicCall(user: TestUser): Promise<number> {
    const res = await fetch(`${replica.url}/api/${org}/platform/workspaces`, {
      headers: { authorization: basicAuth(user) },
    });
    await res.body?.cancel();
    return res.status;
  }

  it('serves a Basic login whose grant takes longer than KEYCLOAK_TIMEOUT_MS, and takes no node out', async () => {
    for (const front of fronts) front.hold(TOKEN, 2.5 * TIMEOUT_MS);
    try {
      const users = await Promise.all([member(), member(), member(), member()]);
      // Four at once: both nodes get grants they answer late.
      expect(await Promise.all(users.map(basicCall))).toEqual([200, 200, 200, 200]);
      expect(fronts.map((front) => front.seen.some((seen) => TOKEN.test(seen.target)))).toEqual([
        true,
        true,
      ]);
      expect(nodeChanges).toEqual([]);
    } finally {
      for (const front of fronts) front.hold(TOKEN, 0);
    }
  });

  it('a login waiting for one of the same account in flight gets its answer, however long that one takes', async () => {
    // Longer than a waiting attempt waited before (LOGIN_WAIT_SECONDS, 5 s), then 503.
    for (const front of fronts) front.hold(TOKEN, 6000);
    try {
      const user = await member();
      const seenBefore = fronts.map((front) => front.seen.length);
      const granted = postToken(replica.url + '/auth', org, passwordGrantBody(user));
      // The grant holds the account's one attempt once Keycloak has it; then the Basic login.
      await expect
        .poll(
          () =>
            fronts.some((front, i) =>
              front.seen.slice(seenBefore[i]).some((seen) => TOKEN.test(seen.target)),
            ),
          EVENTUALLY,
        )
        .toBe(true);
      const basic = basicCall(user);
      expect((await granted).status).toBe(200);
      expect(await basic).toBe(200);
    } finally {
      for (const front of fronts) front.hold(TOKEN, 0);
    }
  });

  it('a node that answers nothing, its probe neither, still goes down; the other stays in', async () => {
    await fronts[1]!.set('hang');
    try {
      // Logins go round robin: one reaches node 1, waits KEYCLOAK_TIMEOUT_MS, and its probe
      // finds the node silent too (that login answers 504: a grant is never sent twice).
      await expect
        .poll(
          async () => {
            await basicCall(await member());
            return nodeChanges.filter((change) => change.startsWith('1 down')).length;
          },
          { timeout: 60_000, interval: 10 },
        )
        .toBe(1);
      expect(nodeChanges.filter((change) => change.startsWith('0 '))).toEqual([]);
      // Node 0 serves every login now.
      expect(await basicCall(await member())).toBe(200);
    } finally {
      await fronts[1]!.set('forward');
    }
  }, 120_000);
});
