import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createLogger } from '../../src/http/logger.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import {
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  uniqueId,
  userIdOf,
} from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * The account of a login e-mail, looked up in Keycloak's admin API (auth/login-accounts.ts),
 * seen from the admin API's side: a replica talks to the real Keycloak through a front that
 * counts, and can hold, its requests.
 */
describe("a login e-mail's account, against the real Keycloak's admin API", () => {
  let front: KeycloakFront;
  let replica: Replica;
  /** Another replica sharing the first's Redis, straight to Keycloak: its answers are shared. */
  let peer: Replica;
  const clock = aheadClock();
  // The replica's bound on its admin calls: a few seconds, so that a lookup through the real
  // admin API on a loaded machine (held a further 300 ms below) is answered inside it; the tests
  // of failed lookups hold theirs past it.
  const TIMEOUT_MS = 5000;
  const MASTER_LOOKUP = /\/admin\/realms\/master\/users\/?\?.*email=/;
  const masterLookups = () => front.seen.filter((seen) => MASTER_LOOKUP.test(seen.target)).length;
  const masterToken = `/auth/realms/master/protocol/openid-connect/token`;

  beforeAll(async () => {
    front = await startKeycloakFront(testEnv().keycloakUrl);
    const shared = {
      KEYCLOAK_TIMEOUT_MS: String(TIMEOUT_MS),
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}maillookup:`,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
      TRUSTED_PROXIES: '127.0.0.1',
      LOGIN_MAX_FAILURES_PER_USER_AND_ADDRESS: '3',
      LOGIN_MAX_FAILURES_PER_ADDRESS: '10',
    };
    replica = await startReplica(
      19060,
      { ...shared, KEYCLOAK_URL: front.url },
      createLogger('silent'),
      clock,
    );
    peer = await startReplica(19062, shared);
  });

  afterAll(async () => {
    await peer.gateway.close();
    await replica.gateway.close();
    await front.close();
    await closeTestDb();
  });

  const post = (path: string, body: string, address: string, base = replica.url) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-forwarded-for': address },
      body,
    });

  it('an e-mail posted to realm master elsewhere than a login is not looked up', async () => {
    const before = masterLookups();
    const response = await post('/auth/realms/master/x', 'username=nobody%40x.io', '10.61.0.2');
    // Keycloak's answer to a path it does not have: the guard let it by without asking.
    expect(response.status).toBeLessThan(500);
    expect(masterLookups() - before).toBe(0);
    // A password grant naming an e-mail is a login: asked once.
    const grant = 'grant_type=password&client_id=admin-cli&username=other%40x.io&password=p';
    expect((await post(masterToken, grant, '10.61.0.2')).status).toBe(401);
    expect(masterLookups() - before).toBe(1);
  });

  it('one form naming many e-mails is refused, with no lookup, on any path of realm master', async () => {
    const same = Array.from({ length: 1000 }, () => 'username=a%40x.io');
    const distinct = Array.from({ length: 1000 }, (_, i) => `username=u${i}%40x.io`);
    const body = ['grant_type=password', 'client_id=admin-cli', 'password=p', ...same, ...distinct];
    const before = masterLookups();
    for (const path of [masterToken, '/auth/realms/master/x']) {
      const response = await post(path, body.join('&'), '10.61.0.1');
      expect([path, response.status, await response.json()]).toEqual([
        path,
        400,
        { error: 'invalid_request', error_description: 'The form gives username more than once.' },
      ]);
    }
    expect(masterLookups() - before).toBe(0);
  });

  it('logins naming one e-mail at once cost one lookup between them', async () => {
    const email = `${uniqueId('same-')}@example.com`;
    const before = masterLookups();
    front.hold(MASTER_LOOKUP, 300);
    try {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          post(
            masterToken,
            `grant_type=password&client_id=admin-cli&username=${encodeURIComponent(email)}&password=p${i}`,
            `10.61.0.${10 + i}`,
          ),
        ),
      );
      expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 401));
    } finally {
      front.hold(MASTER_LOOKUP, 0);
    }
    expect(masterLookups() - before).toBe(1);
  });

  it("maps no name to another user's e-mail where the realm does not log in by e-mail", async () => {
    const org = await createOrganization(['ws1']);
    const admin = await keycloakAdmin();
    await admin.realms.update({ realm: org }, { loginWithEmailAllowed: false });
    // A user named like an e-mail, and another whose e-mail that name is.
    const named = await createUser(org, { username: `${uniqueId('named-')}@example.com` });
    const other = await createUser(org);
    const [otherUser] = await admin.users.find({
      realm: org,
      username: other.username,
      exact: true,
    });
    await admin.users.update({ realm: org, id: otherUser!.id! }, { email: named.username });
    const grant = (username: string, password: string) =>
      post(
        `/auth/realms/${org}/protocol/openid-connect/token`,
        passwordGrantBody({ ...other, username, password }),
        '10.61.0.50',
      );
    // The other user past its limit from this address.
    for (let i = 0; i < 3; i++)
      expect((await grant(other.username, `wrong-${i}`)).status).toBe(401);
    expect((await grant(other.username, 'wrong-again')).status).toBe(429);
    // Keycloak logs the named user in by its name: an account of its own to the throttle.
    const response = await grant(named.username, named.password);
    expect(response.status).toBe(200);
  });

  it("an organization deleted and made again under its id keeps no e-mail's old account", async () => {
    const platformAdmin = basicAuth(await createUser('master'));
    const org = uniqueId('mailreuse-');
    const email = `${uniqueId('reused-')}@example.com`;
    const base = { base: replica.url };
    const make = async () => {
      const made = await callApi('/api/platform/organizations', platformAdmin, {
        ...base,
        method: 'POST',
        body: { id: org, name: 'Reused' },
      });
      expect(made.status, JSON.stringify(made.body)).toBe(200);
    };
    const withEmail = async (user: Awaited<ReturnType<typeof createUser>>) => {
      const admin = await keycloakAdmin();
      await admin.users.update({ realm: org, id: await userIdOf(user) }, { email });
      return user;
    };
    const basic = (username: string, password: string, address: string) =>
      callApi(`/api/${org}/platform/workspaces`, basicAuth({ username, password }), {
        ...base,
        headers: { 'x-forwarded-for': address },
      });
    // The first organization: its user `shared` logs in by the e-mail.
    await make();
    const former = await withEmail(await createUser(org, { username: 'shared' }));
    expect((await basic(email, former.password, '10.61.0.70')).status).toBe(200);
    // Keycloak's removal of a realm can outlast this replica's bound on its admin calls
    // (TIMEOUT_MS, a few seconds) on a loaded machine: 504 `504-11001`, Keycloak too slow,
    // while the removal goes on there. A delete repeated then completes it.
    const deleted = await vi.waitFor(async () => {
      const answer = await callApi(
        `/api/platform/organizations/${org}?confirm=${org}`,
        platformAdmin,
        {
          ...base,
          method: 'DELETE',
        },
      );
      expect(answer.body.result, JSON.stringify(answer.body)).not.toBe('504-11001');
      return answer;
    }, EVENTUALLY);
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    // The new organization: another person named `shared`, and bob, whose e-mail it now is.
    await make();
    const shared = await createUser(org, { username: 'shared' });
    const bob = await withEmail(await createUser(org));
    const address = '10.61.0.71';
    for (let i = 0; i < 3; i++)
      expect((await basic(email, `wrong-${i}`, address)).status).toBe(401);
    // Bob's failures are his: the other user logs in from the address, bob no more.
    expect((await basic(shared.username, shared.password, address)).status).toBe(200);
    expect((await basic(bob.username, 'wrong-again', address)).status).toBe(429);
  });

  it('asks nothing of a name no e-mail can be, so it cannot make e-mail logins fail', async () => {
    const grant = (username: string) =>
      post(
        masterToken,
        `grant_type=password&client_id=admin-cli&username=${encodeURIComponent(username)}&password=p`,
        '10.61.0.60',
      );
    const before = masterLookups();
    // Longer than any e-mail Keycloak keeps (a search it would refuse), a control character.
    for (const odd of [`${'a'.repeat(10_000)}@x.io`, 'a\u0001b@x.io']) {
      const response = await grant(odd);
      expect(response.status).not.toBe(503);
      expect(response.status).toBeLessThan(500);
    }
    expect(masterLookups() - before).toBe(0);
    // An e-mail login right after is looked up and refused as any wrong password is.
    expect((await grant(`${uniqueId('after-')}@example.com`)).status).toBe(401);
    expect(masterLookups() - before).toBe(1);
  });

  it("fails closed when the admin API cannot tell an e-mail's account, a few seconds at one try", async () => {
    const grant = (email: string) =>
      post(
        masterToken,
        `grant_type=password&client_id=admin-cli&username=${encodeURIComponent(email)}&password=p`,
        '10.61.0.40',
      );
    const unavailable = {
      error: 'temporarily_unavailable',
      error_description: 'Could not tell the account of this e-mail; retry later.',
    };
    front.hold(MASTER_LOOKUP, 3 * TIMEOUT_MS);
    try {
      const before = masterLookups();
      const first = await grant(`${uniqueId('down-')}@example.com`);
      expect([first.status, await first.json()]).toEqual([503, unavailable]);
      expect(masterLookups() - before).toBe(1);
      // Another e-mail at once: answered from the failure, without a lookup or its timeout.
      const started = Date.now();
      const second = await grant(`${uniqueId('down-')}@example.com`);
      expect([second.status, await second.json()]).toEqual([503, unavailable]);
      expect(Date.now() - started).toBeLessThan(TIMEOUT_MS);
      expect(masterLookups() - before).toBe(1);
    } finally {
      front.hold(MASTER_LOOKUP, 0);
    }
    // Once the failure is old, the admin API is asked again.
    clock.advance(30_000);
    const before = masterLookups();
    const again = await grant(`${uniqueId('up-')}@example.com`);
    expect(again.status).toBe(401);
    expect(masterLookups() - before).toBe(1);
  });

  /** A password grant on `realm` naming `email`, to `base` (the replica's public listener). */
  const grantOn = (realm: string, email: string, address: string, base = replica.url) =>
    post(
      `/auth/realms/${realm}/protocol/openid-connect/token`,
      `grant_type=password&client_id=admin-cli&username=${encodeURIComponent(email)}&password=p`,
      address,
      base,
    );
  const masterGrant = (email: string, address: string, base?: string) =>
    grantOn('master', email, address, base);

  /** Makes the replica's lookups on realm master fail (a timeout), as an outage would. */
  async function failMasterLookups(): Promise<void> {
    front.hold(MASTER_LOOKUP, 3 * TIMEOUT_MS);
    try {
      expect((await masterGrant(`${uniqueId('down-')}@example.com`, '10.61.0.70')).status).toBe(
        503,
      );
    } finally {
      front.hold(MASTER_LOOKUP, 0);
    }
  }

  it('answers an e-mail another replica has told while its own lookups of the realm fail', async () => {
    const email = `${uniqueId('told-')}@example.com`;
    // The peer asks Keycloak and shares the answer (nobody has it) through Redis.
    expect((await masterGrant(email, '10.61.0.71', peer.url)).status).toBe(401);
    await failMasterLookups();
    const before = masterLookups();
    // The answer is known: the login goes on to Keycloak, not refused as unresolved.
    const response = await masterGrant(email, '10.61.0.71');
    expect([response.status, await response.json()]).toEqual([
      401,
      { error: 'invalid_grant', error_description: 'Invalid user credentials' },
    ]);
    expect(masterLookups() - before).toBe(0);
    // An e-mail nobody told is still unresolved until the failure is old.
    expect((await masterGrant(`${uniqueId('untold-')}@example.com`, '10.61.0.71')).status).toBe(
      503,
    );
    clock.advance(30_000);
  });

  it("a lookup Keycloak refuses (4xx) leaves the realm's other e-mails asked", async () => {
    // On the admin listener (no bootstrap administrator's guard), a realm Keycloak does not have
    // (its names are case-sensitive): its service-account login is refused, 404.
    const admin = `http://127.0.0.1:${replica.config.ADMIN_PORT}`;
    const odd = await grantOn('MASTER', `${uniqueId('odd-')}@example.com`, '10.61.0.80', admin);
    expect(odd.status).toBe(404);
    const before = masterLookups();
    // Another e-mail of realm master is asked and let through to Keycloak, not refused 503.
    const response = await masterGrant(`${uniqueId('after-odd-')}@example.com`, '10.61.0.81');
    expect(response.status).toBe(401);
    expect(masterLookups() - before).toBe(1);
    // Alike in an organization's realm, through the public listener.
    const org = await createOrganization([]);
    const orgLookup = new RegExp(`/admin/realms/${org}/users/?\\?.*email=`);
    const orgLookups = () => front.seen.filter((seen) => orgLookup.test(seen.target)).length;
    const oddOrg = await grantOn(
      org.toUpperCase(),
      `${uniqueId('odd-')}@example.com`,
      '10.61.0.82',
    );
    expect(oddOrg.status).toBe(404);
    const beforeOrg = orgLookups();
    expect((await grantOn(org, `${uniqueId('after-odd-')}@example.com`, '10.61.0.82')).status).toBe(
      401,
    );
    expect(orgLookups() - beforeOrg).toBe(1);
  });

  it("an e-mail's lookup in a realm named in another case is not the realm's own", async () => {
    // Keycloak's realm names are case-sensitive: `ORG` is not `org`, and no lookup in one tells
    // anything of the other.
    const org = await createOrganization([]);
    const user = await createUser(org);
    const admin = await keycloakAdmin();
    const [found] = await admin.users.find({ realm: org, username: user.username, exact: true });
    const email = `${uniqueId('cased-')}@example.com`;
    await admin.users.update({ realm: org, id: found!.id! }, { email });
    const address = '10.61.0.90';
    const grant = (realm: string, username: string, password: string, from = address) =>
      post(
        `/auth/realms/${realm}/protocol/openid-connect/token`,
        passwordGrantBody({ ...user, username, password }),
        from,
      );
    // The user past its limit from this address, by its user name.
    for (let i = 0; i < 3; i++) {
      expect((await grant(org, user.username, `wrong-${i}`)).status).toBe(401);
    }
    // A login naming the e-mail on `ORG`, held at Keycloak while `org`'s comes.
    const upper = org.toUpperCase();
    const gate = front.gate(new RegExp(`/realms/${upper}/`));
    const orgLookup = new RegExp(`/admin/realms/${org}/users/?\\?.*email=`);
    const orgLookups = () => front.seen.filter((seen) => orgLookup.test(seen.target)).length;
    const before = orgLookups();
    try {
      const odd = grant(upper, email, 'wrong-odd', '10.61.0.91');
      await gate.reached;
      const response = grant(org, email, 'wrong-again');
      // `org`'s e-mail is looked up in `org`, not left to wait for what `ORG` is told.
      await expect.poll(orgLookups, EVENTUALLY).toBe(before + 1);
      gate.open();
      expect((await odd).status).toBe(404);
      // Counted as the user it names: its limit is reached.
      expect((await response).status).toBe(429);
    } finally {
      gate.open();
    }
  });

  it('an e-mail login naming a realm the gateway does not serve costs Keycloak no lookup', async () => {
    // Made-up realms, as an organization id could be and not: none is an organization.
    const realms = Array.from({ length: 30 }, (_, i) =>
      i % 2 ? uniqueId(`made-up-${i}-`) : uniqueId(`Made-Up-${i}-`),
    );
    const naming = (realm: string) => (seen: { target: string }) =>
      seen.target.includes(`/realms/${realm}/`) || seen.target.endsWith(`/realms/${realm}`);
    const first = front.seen.length;
    for (const realm of realms) {
      const response = await grantOn(realm, `${uniqueId('x-')}@example.com`, '10.61.0.100');
      expect(response.status).toBe(404);
    }
    const seen = front.seen.slice(first);
    // Keycloak is asked the grant itself, which it refuses: the gateway logs in to none of them.
    expect(realms.map((realm) => [realm, seen.filter(naming(realm)).length])).toEqual(
      realms.map((realm) => [realm, 1]),
    );
  });
});

/**
 * A replica whose service client's secret is wrong (rotated in Keycloak, not yet in its
 * configuration): Keycloak refuses its service session 401 whoever logs in, so a realm's failed
 * lookup marks the realm, as Keycloak down would, rather than costing each e-mail login a token
 * request of its own. Through a front that counts the requests.
 */
describe('e-mail logins on a replica whose service client secret is wrong', () => {
  let front: KeycloakFront;
  let replica: Replica;

  beforeAll(async () => {
    front = await startKeycloakFront(testEnv().keycloakUrl);
    replica = await startReplica(19064, {
      KEYCLOAK_URL: front.url,
      KEYCLOAK_CLIENT_SECRET: randomBytes(24).toString('base64url'),
      TRUSTED_PROXIES: '127.0.0.1',
    });
  });

  afterAll(async () => {
    await replica.gateway.close();
    await front.close();
    await closeTestDb();
  });

  it("ask Keycloak for the realm's service session once, not once per login", async () => {
    const org = await createOrganization([]);
    const tokenPath = new RegExp(`^/auth/realms/${org}/protocol/openid-connect/token$`);
    const tokenRequests = () => front.seen.filter((seen) => tokenPath.test(seen.target)).length;
    const logins = 5;
    const before = tokenRequests();
    for (let i = 0; i < logins; i++) {
      const response = await fetch(
        `${replica.url}/auth/realms/${org}/protocol/openid-connect/token`,
        {
          method: 'POST',
          headers: {
            'content-type': 'application/x-www-form-urlencoded',
            'x-forwarded-for': `10.61.1.${i + 1}`,
          },
          body: `grant_type=password&client_id=admin-cli&username=${encodeURIComponent(
            `${uniqueId('secret-')}@example.com`,
          )}&password=p`,
        },
      );
      expect(response.status).toBeLessThan(500);
    }
    // Each login's own grant, and one refused service-session login between them.
    expect(tokenRequests() - before).toBeLessThanOrEqual(logins + 1);
  });
});
