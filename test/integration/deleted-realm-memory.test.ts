import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessTokenOf, basicAuth, callApi } from '../helpers/api.ts';
import {
  createUser,
  keycloakAdmin,
  testBackchannelUrl,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';
import {
  ensureOrganizationRealm,
  ensureWorkspaceRoles,
} from '../../src/platform/realm-admin/provisioning.ts';
import { REALM_GONE_MEMORY_MS } from '../../src/auth/gone-realms.ts';

/**
 * An organization whose realm was deleted in Keycloak directly, against the real Keycloak: a
 * fleet still sending its requests costs Keycloak one call per realm and remembered span, not one
 * per request; a token of the realm that is still verified locally (its key set held) is refused
 * by its re-check, not served; and a realm created again under the name is served once the
 * memory has passed. Ports 18970-18971.
 */

const REALM_GONE = "The organization's realm does not exist in Keycloak.";
const workspacesPath = (org: string) => `/api/${org}/platform/workspaces`;

const clock = aheadClock();
let replica: Replica;
let org: string;
let member: TestUser;
let tokens: string[];

beforeAll(async () => {
  // The key set held when the realm goes stays held (no scheduled fetch within the test): only
  // the re-check (due every 60 s, the default) can find out, for a token already verified.
  replica = await startReplica(
    18970,
    { REVOCATION_CHECK_SECONDS: '60', KEY_SET_REFRESH_SECONDS: '3600' },
    undefined,
    clock,
  );
  org = await createOrganization(['ws-a']);
  member = await createUser(org, { workspaceRoles: ['ws-a'] });
  tokens = [await accessTokenOf(member), await accessTokenOf(member)];
  for (const token of tokens) {
    const seen = await callApi(workspacesPath(org), `Bearer ${token}`, { base: replica.url });
    expect(seen.status).toBe(200);
  }
  await (await keycloakAdmin()).realms.del({ realm: org });
});
afterAll(async () => {
  await replica?.gateway.close();
  await closeTestDb();
});

/** `realmgate_keycloak_requests_total` with `label` (e.g. `kind="grant"`), summed over the rest. */
async function keycloakCalls(label: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${replica.config.ADMIN_PORT}/metrics`)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith('realmgate_keycloak_requests_total{'))
    .filter((line) => line.includes(label))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

describe('an organization whose realm was deleted in Keycloak, on a memory of it', () => {
  it("refuses a token still verified locally at its re-check, on introspection's answer", async () => {
    clock.advance(61_000);
    const res = await callApi(workspacesPath(org), `Bearer ${tokens[0]}`, { base: replica.url });
    expect(res.status).toBe(401);
    expect(res.body.result).toBe('401-00002');
    expect(res.body.message).toBe(REALM_GONE);
    // Keycloak's answer is the client's problem, not Keycloak failing.
    expect(await keycloakCalls('outcome="bad_answer"')).toBe(0);
  });

  it('answers a fleet of Basic and Bearer requests from memory, not one Keycloak call each', async () => {
    const first = await callApi(workspacesPath(org), basicAuth(member), { base: replica.url });
    expect(first.body.message).toBe(REALM_GONE);
    const before = {
      grant: await keycloakCalls('kind="grant"'),
      jwks: await keycloakCalls('kind="jwks"'),
    };
    const stranger = await createUser(await createOrganization(['ws-a']));
    const refused = async (authorization: string) => {
      const res = await callApi(workspacesPath(org), authorization, { base: replica.url });
      expect(res.status).toBe(401);
      expect(res.body.message).toBe(REALM_GONE);
    };
    for (let i = 0; i < 10; i++) {
      await refused(basicAuth(member));
      await refused(basicAuth({ ...stranger, password: `wrong-${i}` }));
    }
    expect(await keycloakCalls('kind="grant"')).toBe(before.grant);
    // A token of the realm whose key set is still held: refused on what the logins found.
    for (let i = 0; i < 10; i++) await refused(`Bearer ${tokens[1]}`);
    expect(await keycloakCalls('kind="jwks"')).toBe(before.jwks);
  });

  it('serves the realm created again under the name once the memory has passed', async () => {
    const gone = await callApi(workspacesPath(org), basicAuth(member), { base: replica.url });
    expect(gone.body.message).toBe(REALM_GONE);
    const admin = await keycloakAdmin();
    await ensureOrganizationRealm(admin, {
      organizationId: org,
      organizationName: `Test ${org}`,
      gatewayClientSecret: testEnv().gatewayClientSecret,
      backchannelLogoutUrl: testBackchannelUrl(),
    });
    await ensureWorkspaceRoles(admin, org, 'ws-a');
    await createUser(org, { ...member, workspaceRoles: ['ws-a'] });
    clock.advance(REALM_GONE_MEMORY_MS);
    const basic = await callApi(workspacesPath(org), basicAuth(member), { base: replica.url });
    expect(basic.status).toBe(200);
    const token = await accessTokenOf(member);
    const bearer = await callApi(workspacesPath(org), `Bearer ${token}`, { base: replica.url });
    expect(bearer.status).toBe(200);
  });
});

describe('an organization whose realm was deleted in Keycloak, and its resource metadata', () => {
  it('is no longer described once any path heard the realm is gone, its switch read just before', async () => {
    const deleted = await createOrganization(['ws-a']);
    const user = await createUser(deleted, { workspaceRoles: ['ws-a'] });
    const metadata = `${replica.url}/.well-known/oauth-protected-resource/api/${deleted}`;
    expect((await fetch(metadata)).status).toBe(200);
    await (await keycloakAdmin()).realms.del({ realm: deleted });
    const login = await callApi(workspacesPath(deleted), basicAuth(user), { base: replica.url });
    expect(login.body.message).toBe(REALM_GONE);
    const described = await fetch(metadata);
    expect(described.status).toBe(404);
    expect(await described.json()).toMatchObject({ result: '404-00001', data: null });
  });
});

describe('an organization whose realm was deleted in Keycloak, created again through the gateway', () => {
  it("serves the new realm's logins at once on the replica that created it", async () => {
    const again = await createOrganization(['ws-a']);
    const user = await createUser(again, { workspaceRoles: ['ws-a'] });
    await (await keycloakAdmin()).realms.del({ realm: again });
    const gone = await callApi(workspacesPath(again), basicAuth(user), { base: replica.url });
    expect(gone.body.message).toBe(REALM_GONE);

    const admin = basicAuth(await createUser('master'));
    const created = await callApi('/api/platform/organizations', admin, {
      base: replica.url,
      method: 'POST',
      body: { id: again, name: `Again ${again}` },
    });
    expect(created.status).toBe(200);
    const member = await createUser(again);
    // Within the memory's span: the gateway made the realm, so it knows it exists.
    const basic = await callApi(workspacesPath(again), basicAuth(member), { base: replica.url });
    expect(basic.status).toBe(200);
    const token = await accessTokenOf(member);
    const bearer = await callApi(workspacesPath(again), `Bearer ${token}`, { base: replica.url });
    expect(bearer.status).toBe(200);
  });
});
