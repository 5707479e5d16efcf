import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, callApi, type ApiResponse } from '../helpers/api.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { createUser, keycloakAdmin, uniqueId } from '../helpers/keycloak.ts';
import { closeTestDb, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { workspacesClientIdOf } from '../../src/tenancy/identifiers.ts';

/**
 * The platform API's organization changes through a replica whose Keycloak sits behind a front
 * (the real Keycloak and database). Ports 21350-21351.
 *
 * A proxy in front of Keycloak may answer 404 while Keycloak is away: no change may read that
 * as the organization's realm gone (only Keycloak's own "Realm not found." says so), nor delete
 * or change a record on it. And a disable and an enable of one organization at once, on two
 * replicas, leave Keycloak and the database agreeing.
 */

/** The replica waits for a held answer longer than a loaded machine takes to reach the open. */
const HOLD_BOUND = '30000';

function expectOk(answer: ApiResponse): unknown {
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.data;
}

function expectRefused(answer: ApiResponse, status: number, result: string): void {
  expect(answer.status, JSON.stringify(answer.body)).toBe(status);
  expect(answer.body).toMatchObject({ data: null, result });
}

async function rowsOf(org: string) {
  const db = testDb();
  const count = async (table: string, column: string) =>
    Number(
      (
        await db(table)
          .where({ [column]: org })
          .count({ n: '*' })
      )[0]?.n ?? 0,
    );
  return {
    organizations: await count('organizations', 'id'),
    workspaces: await count('workspaces', 'organization_id'),
    operations: await count('operations', 'organization_id'),
  };
}

/** Whether the organization is enabled in Keycloak (its realm) and in the database (its row). */
async function enabledOf(org: string) {
  const realm = await (await keycloakAdmin()).realms.findOne({ realm: org });
  const row = (await testDb()('organizations').where({ id: org }).first()) as
    { enabled: boolean } | undefined;
  return { keycloak: realm?.enabled, database: row?.enabled };
}

describe('organization changes behind a proxy in front of Keycloak', () => {
  let admin: string;
  let front: KeycloakFront;
  let replica: Replica;

  beforeAll(async () => {
    admin = basicAuth(await createUser('master'));
    front = await startKeycloakFront(testEnv().keycloakUrl);
    replica = await startReplica(21350, {
      KEYCLOAK_URL: front.url,
      KEYCLOAK_TIMEOUT_MS: HOLD_BOUND,
    });
  });
  afterEach(async () => {
    await front.set('forward');
  });
  afterAll(async () => {
    await replica?.gateway.close();
    await front?.close();
    await closeTestDb();
  });

  const onReplica = (path: string, method = 'GET', body?: unknown) =>
    callApi(`/api/platform/organizations${path}`, admin, { base: replica.url, method, body });

  /** An organization made through the test gateway, with a workspace holding an operation. */
  async function provision(): Promise<string> {
    const org = uniqueId('proxy-');
    const base = '/api/platform/organizations';
    expectOk(await callApi(base, admin, { method: 'POST', body: { id: org, name: 'Proxy' } }));
    const workspaces = `${base}/${org}/workspaces`;
    expectOk(await callApi(workspaces, admin, { method: 'POST', body: { id: 'ws1', name: 'W' } }));
    expectOk(
      await callApi(`${workspaces}/ws1/operations`, admin, {
        method: 'POST',
        body: { operation_name: 'Op' },
      }),
    );
    return org;
  }

  /**
   * Keycloak away behind its proxy, for the replica whose admin session is logged in (its
   * calls reach the realm's admin API, not a login the proxy refuses).
   */
  async function keycloakAwayBehindProxy(org: string): Promise<void> {
    expectOk(await onReplica(`/${org}/token-lifetimes`));
    await front.set('notFound');
    front.seen.length = 0;
  }

  /** Whether the replica asked the admin API about the realm while the proxy answered. */
  const realmAsked = (org: string) =>
    front.seen.some((request) => request.target.includes(`/admin/realms/${org}`));

  it('a repeated create keeps the organization, its workspaces and operations', async () => {
    const org = await provision();
    const before = await rowsOf(org);
    await keycloakAwayBehindProxy(org);

    expectRefused(await onReplica('', 'POST', { id: org, name: 'Proxy' }), 502, '502-11001');
    expect(realmAsked(org)).toBe(true);
    expect(await rowsOf(org)).toEqual(before);

    await front.set('forward');
    expect(expectOk(await onReplica('', 'POST', { id: org, name: 'Proxy' }))).toMatchObject({
      id: org,
    });
    expect(await rowsOf(org)).toEqual(before);
  });

  it('a delete leaves the realm and the records, and says it failed', async () => {
    const org = await provision();
    const before = await rowsOf(org);
    await keycloakAwayBehindProxy(org);

    expectRefused(await onReplica(`/${org}?confirm=${org}`, 'DELETE'), 502, '502-11001');
    expect(realmAsked(org)).toBe(true);
    expect(await rowsOf(org)).toEqual(before);
    expect(await (await keycloakAdmin()).realms.findOne({ realm: org })).toBeTruthy();

    // Once Keycloak is back the delete is repeated to completion.
    await front.set('forward');
    expectOk(await onReplica(`/${org}?confirm=${org}`, 'DELETE'));
    expect(await rowsOf(org)).toEqual({ organizations: 0, workspaces: 0, operations: 0 });
    expect(await (await keycloakAdmin()).realms.findOne({ realm: org })).toBeFalsy();
  });

  it("a workspace delete leaves the workspace's roles and records", async () => {
    const org = await provision();
    const before = await rowsOf(org);
    await keycloakAwayBehindProxy(org);

    expectRefused(await onReplica(`/${org}/workspaces/ws1`, 'DELETE'), 502, '502-11001');
    expect(realmAsked(org)).toBe(true);
    expect(await rowsOf(org)).toEqual(before);
    const kc = await keycloakAdmin();
    const [client] = await kc.clients.find({ realm: org, clientId: workspacesClientIdOf(org) });
    expect(
      await kc.clients.findRole({ realm: org, id: client!.id!, roleName: 'ws1' }),
    ).toBeTruthy();
  });

  it('a disable changes neither the realm nor the record', async () => {
    const org = await provision();
    await keycloakAwayBehindProxy(org);

    expectRefused(await onReplica(`/${org}/disable`, 'POST'), 502, '502-11001');
    expect(realmAsked(org)).toBe(true);
    expect(await enabledOf(org)).toEqual({ keycloak: true, database: true });
  });

  it("a disable still changes the record when Keycloak's own answer is that the realm is gone", async () => {
    const org = await provision();
    // What a delete that stopped after Keycloak leaves: the realm gone, the rows still there.
    await (await keycloakAdmin()).realms.del({ realm: org });

    expect(expectOk(await onReplica(`/${org}/disable`, 'POST'))).toMatchObject({ enabled: false });
    expect(await enabledOf(org)).toEqual({ keycloak: undefined, database: false });
  });

  it('a disable and an enable at once, on two replicas, leave Keycloak and the database agreeing', async () => {
    const org = await provision();
    // The disable's realm update has reached Keycloak (the realm is disabled there); its answer
    // is held at the front while the enable runs through the test gateway.
    const update = front.gate(new RegExp(`/admin/realms/${org}$`));
    const disable = onReplica(`/${org}/disable`, 'POST');
    await update.reached;
    const enable = callApi(`/api/platform/organizations/${org}/enable`, admin, { method: 'POST' });
    // The enable either ends meanwhile (nothing keeps it from overtaking the disable) or waits
    // for the organization's lock; only then is the disable's answer let through.
    let ended = false;
    const waiting = waitForOrganizationLock(() => ended);
    await Promise.race([enable, waiting]);
    ended = true;
    update.open();
    expectOk(await disable);
    expectOk(await enable);

    // The enable, the later of the two, holds in both.
    expect(await enabledOf(org)).toEqual({ keycloak: true, database: true });
  });

  it("a workspace can be created while a disable waits for Keycloak's answer", async () => {
    const org = await provision();
    const update = front.gate(new RegExp(`/admin/realms/${org}$`));
    const disable = onReplica(`/${org}/disable`, 'POST');
    await update.reached;
    // The disable holds the organization's row; a new workspace's reference to it must not wait.
    const workspaces = `/api/platform/organizations/${org}/workspaces`;
    expectOk(await callApi(workspaces, admin, { method: 'POST', body: { id: 'ws2', name: 'W' } }));
    update.open();
    expectOk(await disable);
    expect(await rowsOf(org)).toMatchObject({ workspaces: 2 });
  });
});

/** Resolves once a query waits for the lock of an organization's record (`for no key update`). */
async function waitForOrganizationLock(stop: () => boolean): Promise<void> {
  while (!stop()) {
    const { rows } = await testDb().raw<{ rows: { n: number }[] }>(
      `select count(*)::int as n from pg_stat_activity
        where wait_event_type = 'Lock' and query ilike '%from "organizations"%for no key update%'`,
    );
    if ((rows[0]?.n ?? 0) > 0) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
