import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../src/cli/main.ts';
import { accessTokenOf, basicAuth } from '../helpers/api.ts';
import { capturingIo } from '../helpers/cli-io.ts';
import {
  fromEveryWorker,
  startClusteredGateway,
  type Answer,
  type ClusteredGateway,
} from '../helpers/clustered-gateway.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { claimsOf, createUser, keycloakAdmin, type TestUser } from '../helpers/keycloak.ts';
import { ensureOrganizationRealm } from '../../src/platform/realm-admin/provisioning.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import {
  addGeneratedRsaKey,
  importRsaKey,
  publishedKids,
  removeKeyProvider,
  setKeyProvider,
  signedToken,
  signingKeyProvider,
} from '../helpers/realm-keys.ts';
import { REALM_GONE_MESSAGE } from '../../src/keycloak/realm-gone.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { startKeycloakRelay, type KeycloakRelay } from '../helpers/tcp-front.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * What a signing key removed in Keycloak means at the gateway, against the real Keycloak, with
 * two replicas sharing Redis: its tokens, seen or not, are refused within KEY_SET_REFRESH_SECONDS
 * (plus one fetch), or at once on every replica when an operator forces a refresh (API, CLI); a
 * rotation loses no request; an outage keeps the last good set. The schedule's own bounds are
 * shown on an injected clock in test/unit/auth/jwks.test.ts.
 */

const UNKNOWN_KEY = 'Token was signed with an unknown key.';
const bearer = (token: string) => `Bearer ${token}`;
const workspacesPath = (org: string) => `/api/${org}/platform/workspaces`;

/** Status and message of `GET path` on `replica`. */
async function answer(
  replica: Replica,
  path: string,
  authorization: string,
): Promise<{ status: number; message: string }> {
  const res = await fetch(`${replica.url}${path}`, { headers: { authorization } });
  const body = (await res.json()) as { message: string };
  return { status: res.status, message: res.status === 200 ? 'ok' : body.message };
}

const OK = { status: 200, message: 'ok' };
const REFUSED = { status: 401, message: UNKNOWN_KEY };

/** Two replicas on one Redis bus of their own (ports `port` to `port + 3`). */
async function replicaPair(port: number, overrides: Record<string, string>): Promise<Replica[]> {
  const bus = {
    REDIS_URL: testEnv().redisUrl,
    REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}keys-${randomBytes(4).toString('hex')}:`,
    // Only the key set decides here (a re-check would refuse a removed key's token too).
    REVOCATION_CHECK_SECONDS: 'off',
    ...overrides,
  };
  return Promise.all([startReplica(port, bus), startReplica(port + 2, bus)]);
}

const replicas: Replica[] = [];
afterAll(async () => {
  await Promise.all(replicas.map((replica) => replica.gateway.close()));
  await closeTestDb();
});

describe('a signing key removed in Keycloak (KEY_SET_REFRESH_SECONDS=2, two replicas)', () => {
  let pair: Replica[];
  beforeAll(async () => {
    pair = await replicaPair(18700, { KEY_SET_REFRESH_SECONDS: '2' });
    replicas.push(...pair);
  });

  it('refuses its tokens, seen and never seen, on both replicas within 2 s and one fetch', async () => {
    const org = await createOrganization(['ws-a']);
    const genuine = await accessTokenOf(await createUser(org, { workspaceRoles: ['ws-a'] }));
    const leaked = await importRsaKey(org);
    const unseen = () => signedToken(leaked, genuine, ['ws-a']);
    const seen = await unseen();
    for (const replica of pair)
      expect(await answer(replica, workspacesPath(org), bearer(seen))).toEqual(OK);

    // Passive: it signs nothing new, but Keycloak still publishes it, so its tokens verify.
    await setKeyProvider(leaked, { active: false });
    expect(await publishedKids(org)).toContain(leaked.kid);
    for (const replica of pair) {
      expect(await answer(replica, workspacesPath(org), bearer(seen))).toEqual(OK);
      expect(await answer(replica, workspacesPath(org), bearer(await unseen()))).toEqual(OK);
    }

    // Disabled: it leaves the published set.
    await setKeyProvider(leaked, { enabled: false });
    const removedAt = Date.now();
    expect(await publishedKids(org)).not.toContain(leaked.kid);
    const refusedAfter = await Promise.all(
      pair.map(async (replica) => {
        await expect
          .poll(() => answer(replica, workspacesPath(org), bearer(seen)), EVENTUALLY)
          .toEqual(REFUSED);
        return Date.now() - removedAt;
      }),
    );
    // The stated bound: KEY_SET_REFRESH_SECONDS, plus one fetch (at most KEYCLOAK_TIMEOUT_MS).
    for (const ms of refusedAfter) expect(ms).toBeLessThan(2000 + 5000);
    for (const replica of pair) {
      expect(await answer(replica, workspacesPath(org), bearer(await unseen()))).toEqual(REFUSED);
    }
    // Keycloak's own key, and tokens it signs, are untouched.
    for (const replica of pair)
      expect(await answer(replica, workspacesPath(org), bearer(genuine))).toEqual(OK);
  });

  it('refuses the tokens of a realm deleted in Keycloak on both replicas, and serves the realm again once it is created again', async () => {
    const org = await createOrganization(['ws-a']);
    const before = await accessTokenOf(await createUser(org, { workspaceRoles: ['ws-a'] }));
    for (const replica of pair)
      expect(await answer(replica, workspacesPath(org), bearer(before))).toEqual(OK);

    const admin = await keycloakAdmin();
    await admin.realms.del({ realm: org });
    // The next scheduled fetch finds no realm: its key set is dropped, its schedule stopped.
    for (const replica of pair) {
      await expect
        .poll(() => answer(replica, workspacesPath(org), bearer(before)), EVENTUALLY)
        .toEqual({ status: 401, message: REALM_GONE_MESSAGE });
    }

    // The same name again (new keys): once the memory of the realm gone has passed
    // (REALM_GONE_MEMORY_MS, 10 s), its first token starts the realm's key set over.
    await ensureOrganizationRealm(admin, {
      organizationId: org,
      organizationName: `Test ${org}`,
      gatewayClientSecret: testEnv().gatewayClientSecret,
    });
    const after = await accessTokenOf(await createUser(org));
    for (const replica of pair) {
      await expect
        .poll(() => answer(replica, workspacesPath(org), bearer(after)), EVENTUALLY)
        .toEqual(OK);
      expect(await answer(replica, workspacesPath(org), bearer(before))).toEqual(REFUSED);
    }
  });

  it('loses no request signed by a published key through a rotation: new key active, old passive, old removed', async () => {
    const org = await createOrganization(['ws-a']);
    const member = await createUser(org, { workspaceRoles: ['ws-a'] });
    const old = await signingKeyProvider(org);
    const oldToken = await accessTokenOf(member);
    let current = oldToken;
    let oldPublished = true;
    let running = true;
    let rounds = 0;
    const lost: string[] = [];
    // A steady stream through both replicas: the newest token, and the old key's while published.
    const stream = (async () => {
      while (running) {
        const tokens = oldPublished ? [current, oldToken] : [current];
        for (const replica of pair) {
          for (const token of tokens) {
            const got = await answer(replica, workspacesPath(org), bearer(token));
            if (got.status !== 200) lost.push(`${String(claimsOf(token).jti)}: ${got.message}`);
          }
        }
        rounds++;
      }
    })();
    const afterRounds = async (n: number) => {
      const target = rounds + n;
      await expect.poll(() => rounds, EVENTUALLY).toBeGreaterThanOrEqual(target);
    };

    await afterRounds(5);
    const next = await addGeneratedRsaKey(org, 200);
    current = await accessTokenOf(member);
    expect(JSON.parse(Buffer.from(current.split('.')[0]!, 'base64url').toString())).toMatchObject({
      kid: next.kid,
    });
    await afterRounds(5);
    await setKeyProvider(old, { active: false });
    await afterRounds(10);
    // No request with the old key's token is in flight once two rounds have passed without it.
    oldPublished = false;
    await afterRounds(2);
    await removeKeyProvider(old);
    for (const replica of pair) {
      await expect
        .poll(() => answer(replica, workspacesPath(org), bearer(oldToken)), EVENTUALLY)
        .toEqual(REFUSED);
    }
    await afterRounds(5);
    running = false;
    await stream;
    expect(lost).toEqual([]);
    expect(rounds).toBeGreaterThan(30);
  });
});

describe('a forced key-set refresh (KEY_SET_REFRESH_SECONDS=3600, two replicas)', () => {
  let pair: Replica[];
  let admin: TestUser;
  let org: string;
  let genuine: string;
  beforeAll(async () => {
    pair = await replicaPair(18704, { KEY_SET_REFRESH_SECONDS: '3600' });
    replicas.push(...pair);
    admin = await createUser('master');
    org = await createOrganization(['ws-a']);
    genuine = await accessTokenOf(await createUser(org, { workspaceRoles: ['ws-a'] }));
  });

  /** A removed key's token that both replicas verified while the key was published. */
  async function removedKeysToken(): Promise<string> {
    const leaked = await importRsaKey(org);
    const token = await signedToken(leaked, genuine, ['ws-a']);
    for (const replica of pair)
      expect(await answer(replica, workspacesPath(org), bearer(token))).toEqual(OK);
    await removeKeyProvider(leaked);
    // Without a refresh, the replicas would serve it for up to an hour.
    for (const replica of pair)
      expect(await answer(replica, workspacesPath(org), bearer(token))).toEqual(OK);
    return token;
  }

  it('through the API refuses the removed key at once on the replica asked, and on the other', async () => {
    const token = await removedKeysToken();
    const [asked, other] = pair as [Replica, Replica];
    const res = await fetch(`${asked.url}/api/platform/organizations/${org}/signing-keys/refresh`, {
      method: 'POST',
      headers: { authorization: basicAuth(admin) },
    });
    const body = (await res.json()) as {
      result: string;
      data: { realm: string; key_ids: string[] };
    };
    expect(res.status).toBe(200);
    expect(body.data).toEqual({ realm: org, key_ids: await publishedKids(org) });
    expect(await answer(asked, workspacesPath(org), bearer(token))).toEqual(REFUSED);
    await expect
      .poll(() => answer(other, workspacesPath(org), bearer(token)), EVENTUALLY)
      .toEqual(REFUSED);
    expect(await answer(other, workspacesPath(org), bearer(genuine))).toEqual(OK);
  });

  it('through `realmgate realms refresh-keys` does the same', async () => {
    const token = await removedKeysToken();
    const [other, asked] = pair as [Replica, Replica];
    const { io, output } = capturingIo();
    const code = await runCli(
      ['realms', 'refresh-keys', org],
      {
        REALMGATE_URL: asked.url,
        REALMGATE_USERNAME: admin.username,
        REALMGATE_PASSWORD: admin.password,
      },
      io,
    );
    expect({ code, stderr: output.stderr }).toEqual({ code: 0, stderr: '' });
    expect(JSON.parse(output.stdout)).toEqual({ realm: org, key_ids: await publishedKids(org) });
    expect(await answer(asked, workspacesPath(org), bearer(token))).toEqual(REFUSED);
    await expect
      .poll(() => answer(other, workspacesPath(org), bearer(token)), EVENTUALLY)
      .toEqual(REFUSED);
  });

  it('is for administrators only, and names an organization that exists', async () => {
    const [replica] = pair as [Replica];
    const refresh = (path: string, authorization: string) =>
      fetch(`${replica.url}${path}`, { method: 'POST', headers: { authorization } }).then(
        async (res) => ({
          status: res.status,
          result: ((await res.json()) as { result: string }).result,
        }),
      );
    expect(
      await refresh(`/api/platform/organizations/${org}/signing-keys/refresh`, bearer(genuine)),
    ).toMatchObject({ status: 401 });
    expect(
      await refresh(
        '/api/platform/organizations/no-such-org/signing-keys/refresh',
        basicAuth(admin),
      ),
    ).toEqual({ status: 404, result: '404-00001' });
    expect(await refresh('/api/platform/signing-keys/refresh', basicAuth(admin))).toMatchObject({
      status: 200,
    });
  });

  it('answers 404 for an organization whose realm was deleted in Keycloak, as its neighbours do', async () => {
    const [replica] = pair as [Replica];
    const orphan = await createOrganization([]);
    await (await keycloakAdmin()).realms.del({ realm: orphan });
    const res = await fetch(
      `${replica.url}/api/platform/organizations/${orphan}/signing-keys/refresh`,
      { method: 'POST', headers: { authorization: basicAuth(admin) } },
    );
    const body = (await res.json()) as { result: string; data: unknown };
    expect({ status: res.status, result: body.result }).toEqual({
      status: 404,
      result: '404-00001',
    });
    expect(body.data).toBeNull();
  });
});

describe('a Keycloak outage (KEY_SET_REFRESH_SECONDS=1)', () => {
  let keycloak: KeycloakRelay;
  let replica: Replica;
  beforeAll(async () => {
    keycloak = await startKeycloakRelay(18791);
    replica = await startReplica(18708, {
      KEYCLOAK_URL: keycloak.keycloakUrl,
      KEY_SET_REFRESH_SECONDS: '1',
      REVOCATION_CHECK_SECONDS: 'off',
    });
    replicas.push(replica);
  });
  afterAll(() => keycloak.cut());

  /** How many key-set fetches of the replica found Keycloak unreachable. */
  async function unreachableFetches(): Promise<number> {
    const text = await (
      await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/metrics`)
    ).text();
    const line =
      /^realmgate_keycloak_requests_total\{kind="jwks",outcome="unreachable"\} (\d+)/m.exec(text);
    return Number(line?.[1] ?? 0);
  }

  it('keeps the last good set: tokens of published keys, seen or not, are served', async () => {
    const org = await createOrganization(['ws-a']);
    const member = await createUser(org, { workspaceRoles: ['ws-a'] });
    const seen = await accessTokenOf(member);
    const held = await importRsaKey(org);
    expect(await answer(replica, workspacesPath(org), bearer(seen))).toEqual(OK);

    await keycloak.cut();
    try {
      // Background fetches fail ...
      await expect.poll(unreachableFetches, EVENTUALLY).toBeGreaterThanOrEqual(2);
      // ... and every token of a key the last good set holds is still served.
      expect(await answer(replica, workspacesPath(org), bearer(seen))).toEqual(OK);
      expect(
        await answer(replica, workspacesPath(org), bearer(await accessTokenOf(member))),
      ).toEqual(OK);
      expect(
        await answer(replica, workspacesPath(org), bearer(await signedToken(held, seen, ['ws-a']))),
      ).toEqual(OK);
    } finally {
      await keycloak.restore();
    }
  });
});

describe('the workers of one gateway (WORKERS=2, KEY_SET_REFRESH_SECONDS=3600)', () => {
  let gateway: ClusteredGateway;
  beforeAll(async () => {
    gateway = await startClusteredGateway(18730, {
      WORKERS: '2',
      // Served requests are logged at debug: `send` reads the worker from that line.
      LOG_LEVEL: 'debug',
      KEY_SET_REFRESH_SECONDS: '3600',
      REVOCATION_CHECK_SECONDS: 'off',
    });
  });
  afterAll(() => gateway.stop());

  /** Sends `request` on new connections until both workers have answered; their statuses. */
  async function everyWorker(request: () => Promise<Answer>): Promise<Set<number>> {
    const answers = await fromEveryWorker(request);
    return new Set(answers.map((a) => a.status));
  }

  it('a forced refresh through one worker refuses the removed key on every worker', async () => {
    const org = await createOrganization(['ws-a']);
    const genuine = await accessTokenOf(await createUser(org, { workspaceRoles: ['ws-a'] }));
    const leaked = await importRsaKey(org);
    const token = await signedToken(leaked, genuine, ['ws-a']);
    const asToken = () => gateway.send(workspacesPath(org), { authorization: bearer(token) });
    expect(await everyWorker(asToken)).toEqual(new Set([200]));

    await removeKeyProvider(leaked);
    const admin = await createUser('master');
    const refresh = await gateway.send(
      `/api/platform/organizations/${org}/signing-keys/refresh`,
      { authorization: basicAuth(admin) },
      'POST',
    );
    expect(refresh.status).toBe(200);
    // The worker asked has fetched; its sibling fetches as the supervising process relays it.
    await expect.poll(() => everyWorker(asToken), EVENTUALLY).toEqual(new Set([401]));
  });
});
