import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import { SignJWT, type JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  claimsOf,
  createUser,
  keycloakAdmin,
  testBackchannelUrl,
  uniqueId,
  userIdOf,
  grantAtKeycloak,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { importRsaKey, type HeldKey } from '../helpers/realm-keys.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { BACKCHANNEL_LOGOUT_EVENT } from '../../src/auth/bearer/logout-token.ts';
import { createLogger } from '../../src/http/logger.ts';
import { ensureOrganizationRealm } from '../../src/platform/realm-admin/provisioning.ts';
import { STEPS_VERSION } from '../../src/platform/realm-alignment.ts';
import { createRealmAlignmentsRepo } from '../../src/platform/realm-alignments.repo.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';

// Keycloak posts its logout tokens to the test gateway's admin listener (the URL the test realms
// carry, helpers/keycloak.ts), which shares its Redis prefix with replicas A and B. Neither
// replica re-checks tokens with Keycloak: only the revocation shared through Redis can make
// them refuse. Every ending below is made on Keycloak's own port, never through a gateway.

let a: Replica;
/** What replica A logs: its audit lines, and proof that no token is written. */
let logOfA = '';
let b: Replica;
let org: string;
let realmKey: HeldKey;
/** Another organization: its realm publishes `foreignKey`. */
let foreignOrg: string;
let foreignKey: HeldKey;

beforeAll(async () => {
  const shared = {
    REDIS_URL: testEnv().redisUrl,
    REDIS_KEY_PREFIX: testEnv().redisKeyPrefix,
    REVOCATION_CHECK_SECONDS: 'off',
  };
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logOfA += chunk.toString();
      done();
    },
  });
  [a, b] = await Promise.all([
    startReplica(19450, shared, createLogger('info', sink)),
    startReplica(19452, shared),
  ]);
  org = await createOrganization(['ws']);
  // Keys whose private halves the test holds: one the realm publishes (beside Keycloak's own,
  // which keeps signing), one another realm publishes.
  realmKey = await importRsaKey(org);
  foreignOrg = await createOrganization(['ws']);
  foreignKey = await importRsaKey(foreignOrg);
});
afterAll(async () => {
  await Promise.all([a?.gateway.close(), b?.gateway.close()]);
  await closeTestDb();
});

async function status(replica: Replica, token: string, realm = org): Promise<number> {
  const res = await fetch(`${replica.url}/api/${realm}/platform/workspaces`, {
    headers: { authorization: `Bearer ${token}` },
  });
  await res.arrayBuffer();
  return res.status;
}

const bothServe = async (token: string) =>
  expect([await status(a, token), await status(b, token)]).toEqual([200, 200]);

/**
 * Waits until both replicas refuse every token (the event, with a generous bound), and prints
 * how long it took from `started` (the moment before the Keycloak call that ended them).
 */
async function refusedOnBoth(what: string, started: number, tokens: string[]): Promise<void> {
  await expect
    .poll(async () => {
      const statuses = await Promise.all(
        tokens.flatMap((token) => [status(a, token), status(b, token)]),
      );
      return statuses.every((s) => s === 401);
    }, EVENTUALLY)
    .toBe(true);
  const ms = Math.round(performance.now() - started);
  console.log(`back-channel logout, ${what}: refused on both replicas after ${ms} ms`);
}

const sidOf = (token: string) => String(claimsOf(token).sid);

describe('what Keycloak ends on its own port ends on every replica at once', () => {
  it('a session signed out through the admin API', async () => {
    const user = await createUser(org);
    const token = await grantAtKeycloak(user);
    await bothServe(token);
    const admin = await keycloakAdmin();
    const started = performance.now();
    await admin.realms.deleteSession({ realm: org, session: sidOf(token), isOffline: false });
    await refusedOnBoth('admin API session delete', started, [token]);
  });

  it("a user's logout of all sessions (admin API)", async () => {
    const user = await createUser(org);
    const tokens = [await grantAtKeycloak(user), await grantAtKeycloak(user)];
    for (const token of tokens) await bothServe(token);
    const admin = await keycloakAdmin();
    const started = performance.now();
    await admin.users.logout({ realm: org, id: await userIdOf(user) });
    await refusedOnBoth('admin API user logout (2 sessions)', started, tokens);
  });

  it("the account console's sign-out (its REST API, as the console calls it)", async () => {
    const user = await createUser(org);
    const [other, current] = [await grantAtKeycloak(user), await grantAtKeycloak(user)];
    await bothServe(other);
    const account = `${testEnv().keycloakUrl}/realms/${org}/account/sessions`;
    const headers = { authorization: `Bearer ${current}`, accept: 'application/json' };
    // "Sign out" of one device: that session.
    let started = performance.now();
    let res = await fetch(`${account}/${sidOf(other)}`, { method: 'DELETE', headers });
    expect(res.status).toBe(204);
    await refusedOnBoth('account console, sign out one device', started, [other]);
    // "Sign out all devices": the current session too.
    await bothServe(current);
    started = performance.now();
    res = await fetch(`${account}?current=true`, { method: 'DELETE', headers });
    expect(res.status).toBe(204);
    await refusedOnBoth('account console, sign out all devices', started, [current]);
  });
});

const endpointOf = (replica: Replica) =>
  `http://127.0.0.1:${replica.config.ADMIN_PORT}/backchannel-logout`;

/** POSTs a logout request to `url`: a form of `logout_token` unless `body` is given raw. */
async function post(url: string, token: string, body?: string) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: body ?? new URLSearchParams({ logout_token: token }).toString(),
  });
  return { status: res.status, cache: res.headers.get('cache-control'), text: await res.text() };
}

/** A logout token for `sid`/`sub` of the realm as Keycloak writes one, with `changes`. */
function logoutToken(
  key: HeldKey,
  changes: JWTPayload = {},
  header: Record<string, unknown> = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const claims: JWTPayload = {
    iss: `${testEnv().publicUrl}/auth/realms/${org}`,
    aud: apiClientIdOf(org),
    iat: now,
    exp: now + 120,
    jti: randomUUID(),
    sid: randomUUID(),
    sub: randomUUID(),
    typ: 'Logout',
    events: { [BACKCHANNEL_LOGOUT_EVENT]: {} },
    ...changes,
  };
  for (const [name, value] of Object.entries(claims)) if (value === undefined) delete claims[name];
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: key.kid, typ: 'logout+jwt', ...header })
    .sign(key.privateKey);
}

describe('the endpoint refuses what is no logout token of ours, and ends nothing', () => {
  it('refuses each forgery with 400 invalid_request, no-store, and serves the live token still', async () => {
    const user = await createUser(org);
    const live = await grantAtKeycloak(user);
    await bothServe(live);
    const victim = { sid: sidOf(live), sub: String(claimsOf(live).sub) };
    const unsigned = (payload: object) =>
      [{ alg: 'none', typ: 'logout+jwt' }, payload]
        .map((part) => Buffer.from(JSON.stringify(part)).toString('base64url'))
        .join('.') + '.';
    const replayed = await logoutToken(realmKey, { sid: randomUUID(), sub: undefined });
    expect((await post(endpointOf(a), replayed)).status).toBe(200);
    const now = Math.floor(Date.now() / 1000);
    // Each forgery, and the reason A counts and audits for it.
    const forgeries: Record<string, [Promise<string> | string, string]> = {
      "another realm's key": [logoutToken({ ...foreignKey }, victim), 'bad_signature'],
      'alg none': [unsigned(claimsOf(await logoutToken(realmKey, victim))), 'bad_signature'],
      'wrong aud': [logoutToken(realmKey, { ...victim, aud: 'admin-cli' }), 'wrong_audience'],
      'replayed jti': [replayed, 'replayed'],
      'a nonce': [logoutToken(realmKey, { ...victim, nonce: 'n' }), 'nonce'],
      'no events': [logoutToken(realmKey, { ...victim, events: undefined }), 'no_event'],
      'no sid or sub': [logoutToken(realmKey, { sid: undefined, sub: undefined }), 'no_subject'],
      // Section 2.4: `exp` is required (Keycloak's carry it, `iat` + 120 s).
      'no exp': [logoutToken(realmKey, { ...victim, exp: undefined }), 'malformed'],
      'exp passed': [logoutToken(realmKey, { ...victim, iat: now - 60, exp: now - 600 }), 'stale'],
      'iat too old': [
        logoutToken(realmKey, { ...victim, iat: now - 600, exp: now + 600 }),
        'stale',
      ],
      'another issuer': [
        logoutToken(realmKey, { ...victim, iss: 'http://evil.example/auth/realms/x' }),
        'unknown_issuer',
      ],
      garbage: ['garbage', 'malformed'],
    };
    const sent: string[] = [];
    for (const [name, [token]] of Object.entries(forgeries)) {
      sent.push(await token);
      const answer = await post(endpointOf(a), await token);
      expect({ name, ...answer }).toEqual({
        name,
        status: 400,
        cache: 'no-store',
        text: '{"error":"invalid_request"}',
      });
    }
    const huge = `logout_token=${'a'.repeat(64 * 1024)}`;
    expect((await post(endpointOf(b), '', huge)).status).toBe(400);
    expect((await post(endpointOf(b), '', 'other=1')).status).toBe(400);
    const twice = new URLSearchParams([
      ['logout_token', await logoutToken(realmKey, victim)],
      ['logout_token', await logoutToken(realmKey, victim)],
    ]).toString();
    expect((await post(endpointOf(b), '', twice)).status).toBe(400);
    // Everything A and B heard so far has reached them: a marker session ended last is refused.
    const marker = await grantAtKeycloak(await createUser(org));
    const ended = await logoutToken(realmKey, { sid: sidOf(marker), sub: undefined });
    expect((await post(endpointOf(b), ended)).status).toBe(200);
    await refusedOnBoth('a logout token posted to a replica', performance.now(), [marker]);
    await bothServe(live);

    // Counted by reason, audited, and no token written to the log.
    const metrics = await (await fetch(`http://127.0.0.1:${a.config.ADMIN_PORT}/metrics`)).text();
    const counted = (outcome: string) =>
      Number(
        new RegExp(
          `realmgate_backchannel_logout_tokens_total\\{outcome="${outcome}"\\} (\\d+)`,
        ).exec(metrics)?.[1],
      );
    for (const [, reason] of Object.values(forgeries)) expect(counted(reason)).toBeGreaterThan(0);
    expect(counted('accepted')).toBeGreaterThan(0);
    const refusals = logOfA
      .split('\n')
      .filter((line) => line.includes('"audit":true') && line.includes('backchannel_logout'))
      .map((line) => JSON.parse(line) as { outcome: string; target: { reason?: string } });
    for (const [, reason] of Object.values(forgeries)) {
      expect(refusals).toContainEqual(
        expect.objectContaining({ outcome: 'failure', target: { reason } }),
      );
    }
    for (const token of sent) expect(logOfA).not.toContain(token.split('.')[1] || token);
  });

  it("ends no session of another realm a realm's logout token names", async () => {
    // The realm's own key (an administrator of the realm can add one) signs a logout token
    // naming a session of another organization's realm.
    const foreign = await grantAtKeycloak(await createUser(foreignOrg));
    const foreignServed = async () => [
      await status(a, foreign, foreignOrg),
      await status(b, foreign, foreignOrg),
    ];
    expect(await foreignServed()).toEqual([200, 200]);
    const across = await logoutToken(realmKey, { sid: sidOf(foreign), sub: undefined });
    expect((await post(endpointOf(a), across)).status).toBe(200);
    // Both replicas have heard it once they refuse a session ended after it.
    const marker = await grantAtKeycloak(await createUser(org));
    const ended = await logoutToken(realmKey, { sid: sidOf(marker), sub: undefined });
    expect((await post(endpointOf(a), ended)).status).toBe(200);
    await refusedOnBoth(
      'a marker after a logout token naming a foreign session',
      performance.now(),
      [marker],
    );
    expect(await foreignServed()).toEqual([200, 200]);
  });

  it('fetches no key set of a realm the gateway does not serve, however many are named', async () => {
    // Logout tokens whose `iss` names organizations that do not exist (well-formed ids), and an
    // access token of such a realm revoked through the public `/auth`: none may cost Keycloak a
    // key-set fetch (an unknown organization is refused before any key set).
    const jwksCalls = async () => {
      const text = await (await fetch(`http://127.0.0.1:${a.config.ADMIN_PORT}/metrics`)).text();
      return [...text.matchAll(/^realmgate_keycloak_requests_total\{kind="jwks",[^}]*\} (\d+)/gm)]
        .map((match) => Number(match[1]))
        .reduce((sum, count) => sum + count, 0);
    };
    const before = await jwksCalls();
    const now = Math.floor(Date.now() / 1000);
    for (let i = 0; i < 5; i++) {
      const absent = uniqueId('absent-');
      const iss = `${testEnv().publicUrl}/auth/realms/${absent}`;
      const token = await logoutToken(realmKey, { iss, aud: apiClientIdOf(absent) });
      expect(await post(endpointOf(a), token)).toEqual({
        status: 400,
        cache: 'no-store',
        text: '{"error":"invalid_request"}',
      });
      const accessToken = await new SignJWT({ typ: 'Bearer', azp: apiClientIdOf(absent) })
        .setProtectedHeader({ alg: 'RS256', kid: realmKey.kid })
        .setIssuer(iss)
        .setSubject(randomUUID())
        .setJti(randomUUID())
        .setIssuedAt(now)
        .setExpirationTime(now + 300)
        .sign(realmKey.privateKey);
      const res = await fetch(`${a.url}/auth/realms/${absent}/protocol/openid-connect/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: accessToken, client_id: apiClientIdOf(absent) }),
      });
      await res.arrayBuffer();
    }
    expect((await jwksCalls()) - before).toBe(0);
  });

  it('is absent on the public listener', async () => {
    const token = await logoutToken(realmKey);
    const res = await fetch(`${a.url}/backchannel-logout`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ logout_token: token }).toString(),
    });
    expect(res.status).toBe(404);
  });
});

describe('a burst of logout tokens', () => {
  it('200 at once (many sessions ended together) are all acknowledged while Bearer requests go on', async () => {
    const user = await createUser(org);
    const live = await grantAtKeycloak(user);
    await bothServe(live);
    const tokens = await Promise.all(
      Array.from({ length: 200 }, () =>
        logoutToken(realmKey, { sid: randomUUID(), sub: undefined }),
      ),
    );
    let stop = false;
    const served: number[] = [];
    const traffic = (async () => {
      while (!stop) served.push(await status(a, live));
    })();
    const started = performance.now();
    const answers = await Promise.all(tokens.map((token) => post(endpointOf(a), token)));
    const ms = Math.round(performance.now() - started);
    stop = true;
    await traffic;
    console.log(
      `back-channel logout burst: 200 tokens acknowledged in ${ms} ms, ${served.length} Bearer requests served meanwhile`,
    );
    expect(answers.map((answer) => answer.status)).toEqual(tokens.map(() => 200));
    expect(served.length).toBeGreaterThan(0);
    expect(served.every((s) => s === 200)).toBe(true);
  });
});

describe('a flood of refused logout requests', () => {
  it('is counted, each one, but recorded in the audit log at most once a minute per reason', async () => {
    const metricOf = async (outcome: string) => {
      const text = await (await fetch(`http://127.0.0.1:${a.config.ADMIN_PORT}/metrics`)).text();
      const found = new RegExp(
        `realmgate_backchannel_logout_tokens_total\\{outcome="${outcome}"\\} (\\d+)`,
      ).exec(text);
      return Number(found?.[1] ?? 0);
    };
    const recorded = () =>
      logOfA
        .split('\n')
        .filter((line) => line.includes('"audit":true') && line.includes('backchannel_logout'))
        .filter((line) => line.includes('"reason":"no_subject"')).length;
    const [countedBefore, recordedBefore] = [await metricOf('no_subject'), recorded()];
    const garbage = await logoutToken(realmKey, { sid: undefined, sub: undefined });
    for (let i = 0; i < 40; i++) expect((await post(endpointOf(a), garbage)).status).toBe(400);
    expect((await metricOf('no_subject')) - countedBefore).toBe(40);
    expect(recorded() - recordedBefore).toBeLessThanOrEqual(1);
  });
});

describe("every realm's clients of the gateway point at it", () => {
  it('a realm made without the URL gets it when a replica starts, and readiness says so', async () => {
    const realm = uniqueId('org-');
    const admin = await keycloakAdmin();
    await ensureOrganizationRealm(admin, {
      organizationId: realm,
      organizationName: realm,
      gatewayClientSecret: testEnv().gatewayClientSecret,
    });
    const attributesOf = async () =>
      (await admin.clients.find({ realm }))
        .filter((client) => [apiClientIdOf(realm), 'realmgate-gateway'].includes(client.clientId!))
        .map((client) => {
          const attributes = (client.attributes ?? {}) as Record<string, string | undefined>;
          return [
            attributes['backchannel.logout.url'],
            attributes['backchannel.logout.session.required'],
          ];
        });
    // Other files' replicas align a realm they find unrecorded as soon as they start: recorded
    // as aligned it is left alone, and what one set before the record is taken off again, so
    // that only this test's replica aligns it.
    const { id } = (await admin.realms.findOne({ realm }))!;
    const target = { url: testBackchannelUrl(), stepsVersion: STEPS_VERSION };
    await createRealmAlignmentsRepo(testDb()).record({ id: id!, realm }, target);
    for (const client of await admin.clients.find({ realm })) {
      if (![apiClientIdOf(realm), 'realmgate-gateway'].includes(client.clientId!)) continue;
      const attributes = { ...client.attributes };
      delete attributes['backchannel.logout.url'];
      delete attributes['backchannel.logout.session.required'];
      await admin.clients.update({ realm, id: client.id! }, { ...client, attributes });
    }
    const unset = (value: string | undefined) => value === undefined || value === '';
    expect((await attributesOf()).map((pair) => pair.every(unset))).toEqual([true, true]);
    await testDb()('realm_alignments').where({ realm_id: id }).delete();
    const c = await startReplica(19458);
    try {
      const wanted = [testBackchannelUrl(), 'true'];
      await expect.poll(attributesOf, EVENTUALLY).toEqual([wanted, wanted]);
      const readyz = async () =>
        (
          (await (await fetch(`http://127.0.0.1:${c.config.ADMIN_PORT}/readyz`)).json()) as {
            data: { backchannel_logout: unknown };
          }
        ).data.backchannel_logout;
      await expect.poll(readyz, EVENTUALLY).toEqual({ status: 'up', url: testBackchannelUrl() });
      // The public listener shows the outcome alone (the URL is an internal address).
      const open = (await (await fetch(`${c.url}/readyz`)).json()) as {
        data: { backchannel_logout: unknown };
      };
      expect(open.data.backchannel_logout).toBe('up');
    } finally {
      await c.gateway.close();
    }
  });
});
