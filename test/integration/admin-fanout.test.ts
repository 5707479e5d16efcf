import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth } from '../helpers/api.ts';
import {
  accessTokenAt,
  createUser,
  keycloakAdmin,
  uniqueId,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { consoleToken } from '../helpers/lifetime-suite.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { ADMIN_CALLS_AT_ONCE } from '../../src/keycloak/admin-client.ts';
import { MAX_GROUP_READS } from '../../src/platform/realm-admin/role-changes.ts';

// How many admin calls one request makes to Keycloak, and how many at once: the real Keycloak
// behind a TCP front that counts them (and holds each answer a little, so that calls sent
// together are seen together). Port 21340 (and 21341, the admin listener).

/**
 * A user's effective roles of one client: what a listing reads per user (the workspaces its
 * tokens carry), and the check for Keycloak's admin roles.
 */
const USER_COMPOSITE_CLIENT_ROLES = /\/users\/[^/]+\/role-mappings\/clients\/[^/]+\/composite/;
/** A group's members or subgroups (what a change to a group reads). */
const GROUP_READS = /\/groups\/[^/]+\/(members|children)(\?|$)/;
/** A page of master's clients (what the check for Keycloak's admin roles lists first). */
const MASTER_CLIENTS = /\/admin\/realms\/master\/clients\/?(\?|$)/;

let front: KeycloakFront;
let replica: Replica;
let admin: TestUser;

beforeAll(async () => {
  front = await startKeycloakFront(testEnv().keycloakUrl);
  // Every realm of the suite has its client in master, and the check below asks each of them:
  // hundreds of calls through the front, 8 at a time, beside the whole suite's load on the one
  // Keycloak. One of them answering after the default 5 s would be a 504 that says nothing of
  // the bound this file measures.
  replica = await startReplica(21340, { KEYCLOAK_URL: front.url, KEYCLOAK_TIMEOUT_MS: '30000' });
  admin = await createUser('master');
});

afterAll(async () => {
  await replica?.gateway.close();
  await front?.close();
  await closeTestDb();
});

async function apiCall(method: string, path: string): Promise<number> {
  const res = await fetch(`${replica.url}/api${path}`, {
    method,
    headers: { authorization: basicAuth(admin) },
  });
  await res.arrayBuffer();
  return res.status;
}

describe('a change to a master user', () => {
  const made: string[] = [];

  afterAll(async () => {
    const keycloak = await keycloakAdmin();
    for (const realm of made) await keycloak.realms.del({ realm });
  });

  it("asks master's realm-administration clients a few at a time", async () => {
    // Each realm has its client `<realm>-realm` in master: these stand for more organizations.
    const keycloak = await keycloakAdmin();
    for (let i = 0; i < 2 * ADMIN_CALLS_AT_ONCE; i++) {
      const realm = uniqueId('fanout-');
      await keycloak.realms.create({ realm, enabled: true });
      made.push(realm);
    }
    const user = await createUser('master');
    front.hold(USER_COMPOSITE_CLIENT_ROLES, 20);
    const calls = front.track(USER_COMPOSITE_CLIENT_ROLES);
    try {
      expect(await apiCall('POST', `/platform/users/${user.username}/disable`)).toBe(200);
    } finally {
      front.hold(USER_COMPOSITE_CLIENT_ROLES, 0);
    }
    expect(calls.count).toBeGreaterThanOrEqual(2 * ADMIN_CALLS_AT_ONCE);
    expect(calls.peak).toBeLessThanOrEqual(ADMIN_CALLS_AT_ONCE);
  });

  it('is not failed by a realm deleted while it runs (its client in master goes with it)', async () => {
    const keycloak = await keycloakAdmin();
    const realm = uniqueId('gone-');
    await keycloak.realms.create({ realm, enabled: true });
    const user = await createUser('master');
    // The check lists master's clients, `<realm>-realm` among them; the realm goes before it
    // asks that client, as when an organization is deleted during the check.
    const listed = front.gate(MASTER_CLIENTS);
    const change = apiCall('POST', `/platform/users/${user.username}/disable`);
    await listed.reached;
    await keycloak.realms.del({ realm });
    listed.open();
    expect(await change).toBe(200);
  });
});

describe("a listing of an organization's users", () => {
  it('reads each listed user, a few at a time', async () => {
    const workspaces = Array.from({ length: 2 * ADMIN_CALLS_AT_ONCE }, (_, i) => `ws${i}`);
    const org = await createOrganization(workspaces);
    const prefix = uniqueId('fan');
    for (const ws of workspaces) {
      await createUser(org, { username: `${prefix}-${ws}`, workspaceRoles: [ws] });
    }
    front.hold(USER_COMPOSITE_CLIENT_ROLES, 20);
    const calls = front.track(USER_COMPOSITE_CLIENT_ROLES);
    let listed: { workspaces: string[] }[];
    try {
      const res = await fetch(
        `${replica.url}/api/platform/organizations/${org}/users?search=${prefix}&max=1000`,
        {
          headers: { authorization: basicAuth(admin) },
        },
      );
      expect(res.status).toBe(200);
      listed = ((await res.json()) as { data: { workspaces: string[] }[] }).data;
    } finally {
      front.hold(USER_COMPOSITE_CLIENT_ROLES, 0);
    }
    expect(listed.map((user) => user.workspaces).sort()).toEqual(
      workspaces.map((ws) => [ws]).sort(),
    );
    expect(calls.count).toBe(workspaces.length);
    expect(calls.peak).toBeLessThanOrEqual(ADMIN_CALLS_AT_ONCE);
  });
});

describe('a workspace role taken from a group with more subgroups than the gateway reads', () => {
  const adminUrl = () => `http://127.0.0.1:${replica.config.ADMIN_PORT}`;

  it('reads no more than its bound, and ends every token of the realm from before', async () => {
    const org = await createOrganization(['ws']);
    const keycloak = await keycloakAdmin();
    const [client] = await keycloak.clients.find({ realm: org, clientId: `${org}-workspaces` });
    const clientUuid = client!.id!;
    const role = await keycloak.clients.findRole({ realm: org, id: clientUuid, roleName: 'ws' });
    const roles = [{ id: role!.id!, name: role!.name! }];
    const { id: groupId } = await keycloak.groups.create({ realm: org, name: uniqueId('team-') });
    await keycloak.groups.addClientRoleMappings({
      realm: org,
      id: groupId,
      clientUniqueId: clientUuid,
      roles,
    });
    // Each subgroup costs the walk two reads (its members, its own subgroups).
    let lastChild = groupId;
    for (let i = 0; i < MAX_GROUP_READS / 2 + 1; i++) {
      ({ id: lastChild } = await keycloak.groups.createChildGroup(
        { realm: org, id: groupId },
        { name: uniqueId('sub-') },
      ));
    }
    const member = await createUser(org);
    await keycloak.users.addToGroup({ realm: org, id: await userIdOf(member), groupId: lastChild });
    const token = await accessTokenAt(`${replica.url}/auth`, member);
    const onWorkspace = async () =>
      (
        await fetch(`${replica.url}/api/${org}/workspaces/ws/ita/menu/operation_list/filter/`, {
          headers: { authorization: `Bearer ${token}` },
        })
      ).status;
    expect(await onWorkspace()).toBe(200);

    const reads = front.track(GROUP_READS);
    const res = await fetch(
      `${adminUrl()}/auth/admin/realms/${org}/groups/${groupId}/role-mappings/clients/${clientUuid}`,
      {
        method: 'DELETE',
        headers: {
          authorization: `Bearer ${await consoleToken(replica)}`,
          'content-type': 'application/json',
        },
        body: JSON.stringify(roles),
      },
    );
    expect(res.status).toBe(204);
    expect(reads.count).toBeLessThanOrEqual(MAX_GROUP_READS);
    await expect.poll(onWorkspace, EVENTUALLY).toBe(401);
  });
});
