import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteWorkspaceRoles } from '../../src/platform/realm-admin/realm-lifecycle.ts';
import { workspacesClientIdOf } from '../../src/tenancy/identifiers.ts';
import { accessTokenOf, basicAuth, callApi, type ApiResponse } from '../helpers/api.ts';
import {
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  uniqueId,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, testDb } from '../helpers/platform.ts';
import { Writable } from 'node:stream';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { createLogger } from '../../src/http/logger.ts';
import { createReplicaBus } from '../../src/cache/replica-bus.ts';
import {
  createOrganizationEvents,
  type OrganizationChange,
} from '../../src/platform/organization-events.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';

/** An organization made through the API, with workspaces ws1, ws2 (one operation each) and a member of ws1. */
async function provision(admin: string): Promise<{ org: string; member: TestUser }> {
  const org = uniqueId('life-');
  expectOk(await callApi('/api/platform/organizations', admin, post({ id: org, name: 'Life' })));
  for (const ws of ['ws1', 'ws2']) {
    const base = `/api/platform/organizations/${org}/workspaces`;
    expectOk(await callApi(base, admin, post({ id: ws, name: `W ${ws}` })));
    expectOk(await callApi(`${base}/${ws}/operations`, admin, post({ operation_name: 'Op' })));
  }
  return { org, member: await createUser(org, { workspaceRoles: ['ws1'] }) };
}

function post(body?: unknown) {
  return { method: 'POST', body };
}

function expectOk(answer: ApiResponse): unknown {
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  expect(answer.body.result).toBe('000-00000');
  return answer.body.data;
}

function expectRefused(answer: ApiResponse, status: number, result: string): void {
  expect(answer.status, JSON.stringify(answer.body)).toBe(status);
  expect(answer.body).toMatchObject({ data: null, result });
}

/**
 * Polls the status `authorization` gets at `url` until it is `status`: a change made through one
 * gateway taking effect there, and on another one once it has arrived over Redis. How fast a
 * change travels between replicas is a figure of the HA suite (test/ha/ha.test.ts, a revocation
 * on one replica refused on the other, under load); these tests show that it arrives.
 */
async function untilStatus(url: string, authorization: string, status: number): Promise<void> {
  await expect
    .poll(async () => (await fetch(url, { headers: { authorization } })).status, EVENTUALLY)
    .toBe(status);
}

async function rowCounts(org: string) {
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

describe('organization and workspace lifecycle (/api/platform)', () => {
  let admin: string;
  let org: string;
  let member: TestUser;
  let replica: Replica;
  let upstream: RecordingUpstream;
  let log = '';
  afterAll(async () => {
    await replica?.gateway.close();
    await upstream?.close();
    await closeTestDb();
  });

  beforeAll(async () => {
    admin = basicAuth(await createUser('master'));
    ({ org, member } = await provision(admin));
    // A second replica sharing the test gateway's Redis (and so its channel), forwarding the
    // automation route to an upstream, its log kept for the audit lines.
    upstream = await startRecordingUpstream();
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        log += chunk.toString();
        done();
      },
    });
    replica = await startReplica(
      21060,
      {
        REDIS_URL: testEnv().redisUrl,
        REDIS_KEY_PREFIX: testEnv().redisKeyPrefix,
        AUTOMATION_UPSTREAM_URL: upstream.url,
      },
      createLogger('info', sink),
    );
  });

  it('gets one organization, as the list shows it', async () => {
    const one = expectOk(await callApi(`/api/platform/organizations/${org}`, admin));
    const list = expectOk(await callApi('/api/platform/organizations', admin)) as unknown[];
    expect(list).toContainEqual(one);
    expect(one).toMatchObject({ id: org, name: 'Life', enabled: true });
    expectRefused(
      await callApi('/api/platform/organizations/no-such-org', admin),
      404,
      '404-00001',
    );
    expectRefused(await callApi('/api/platform/organizations/Bad.Id', admin), 404, '404-00001');
  });

  it('lists all workspaces of an organization, in the shape organization users see', async () => {
    const all = expectOk(await callApi(`/api/platform/organizations/${org}/workspaces`, admin));
    expect((all as { id: string }[]).map((ws) => ws.id)).toEqual(['ws1', 'ws2']);
    const seen = expectOk(await callApi(`/api/${org}/platform/workspaces`, basicAuth(member)));
    expect(seen).toEqual([(all as unknown[])[0]]);
    const unknown = await callApi('/api/platform/organizations/no-such-org/workspaces', admin);
    expectRefused(unknown, 404, '404-00001');
  });

  it('refuses callers outside the master realm', async () => {
    const asMember = basicAuth(member);
    expectRefused(await callApi(`/api/platform/organizations/${org}`, asMember), 401, '401-00002');
    const del = await callApi(`/api/platform/organizations/${org}?confirm=${org}`, asMember, {
      method: 'DELETE',
    });
    expectRefused(del, 401, '401-00002');
    expectOk(await callApi(`/api/platform/organizations/${org}`, admin));
  });

  it('deletes a workspace: its roles in Keycloak, its operations and its record', async () => {
    // A member of ws2 whose token carries the role, used before the delete on both replicas.
    const ws2Member = await createUser(org, { workspaceRoles: ['ws2'] });
    const bearer = `Bearer ${await accessTokenOf(ws2Member)}`;
    const memberBearer = `Bearer ${await accessTokenOf(member)}`;
    const route = (ws: string) => `/api/${org}/workspaces/${ws}/ita/menu/operation_list/filter/`;
    for (const url of [testEnv().publicUrl, replica.url]) {
      const res = await fetch(`${url}${route('ws2')}`, { headers: { authorization: bearer } });
      expect(res.status).toBe(200);
    }
    upstream.seen.length = 0;

    const path = `/api/platform/organizations/${org}/workspaces/ws2`;
    const deleted = expectOk(await callApi(path, admin, { method: 'DELETE' }));
    // The old token no longer reaches the workspace on either replica (built-in or forwarded
    // route), while members of other workspaces are untouched.
    for (const url of [testEnv().publicUrl, replica.url]) {
      await untilStatus(`${url}${route('ws2')}`, bearer, 401);
      const other = await fetch(`${url}${route('ws1')}`, {
        headers: { authorization: memberBearer },
      });
      expect(other.status).toBe(200);
    }
    expect(upstream.seen.filter((seen) => seen.url.includes('/ws2/'))).toEqual([]);
    upstream.seen.length = 0;
    expect(deleted).toMatchObject({ id: 'ws2', name: 'W ws2' });
    const kc = await keycloakAdmin();
    const [client] = await kc.clients.find({ realm: org, clientId: workspacesClientIdOf(org) });
    for (const roleName of ['ws2', '_ws2-admin']) {
      expect(await kc.clients.findRole({ realm: org, id: client!.id!, roleName })).toBeNull();
    }
    expect(
      await kc.clients.findRole({ realm: org, id: client!.id!, roleName: 'ws1' }),
    ).toBeTruthy();
    const operations = await testDb()('operations').where({ organization_id: org });
    expect(operations.map((row: { workspace_id: string }) => row.workspace_id)).toEqual(['ws1']);
    expectRefused(await callApi(path, admin, { method: 'DELETE' }), 404, '404-00002');
    const malformed = `/api/platform/organizations/${org}/workspaces/-bad`;
    expectRefused(await callApi(malformed, admin, { method: 'DELETE' }), 404, '404-00002');
  });

  it('deletes a workspace: a token holding its role through a group reaches none of that id again, created anew or not', async () => {
    const base = `/api/platform/organizations/${org}/workspaces`;
    expectOk(await callApi(base, admin, post({ id: 'ws3', name: 'W ws3' })));
    const kc = await keycloakAdmin();
    const [client] = await kc.clients.find({ realm: org, clientId: workspacesClientIdOf(org) });
    const role = await kc.clients.findRole({ realm: org, id: client!.id!, roleName: 'ws3' });
    const { id: groupId } = await kc.groups.create({ realm: org, name: uniqueId('team-') });
    await kc.groups.addClientRoleMappings({
      realm: org,
      id: groupId,
      clientUniqueId: client!.id!,
      roles: [{ id: role!.id!, name: role!.name! }],
    });
    const teamMember = await createUser(org);
    const [user] = await kc.users.find({ realm: org, username: teamMember.username, exact: true });
    await kc.users.addToGroup({ realm: org, id: user!.id!, groupId });
    const bearer = `Bearer ${await accessTokenOf(teamMember)}`;
    const route = `/api/${org}/workspaces/ws3/ita/menu/operation_list/filter/`;
    for (const url of [testEnv().publicUrl, replica.url]) {
      const res = await fetch(`${url}${route}`, { headers: { authorization: bearer } });
      expect(res.status).toBe(200);
    }
    expectOk(await callApi(`${base}/ws3`, admin, { method: 'DELETE' }));
    // A workspace of the same id: its new role is nobody's, whatever the old token names.
    expectOk(await callApi(base, admin, post({ id: 'ws3', name: 'W ws3 again' })));
    for (const url of [testEnv().publicUrl, replica.url])
      await untilStatus(`${url}${route}`, bearer, 401);
    // The next test counts what the upstream sees from its own start.
    upstream.seen.length = 0;
  });

  it('disables an organization: 403-23001 on every route, Basic and Bearer, on every replica', async () => {
    const bearer = `Bearer ${await accessTokenOf(member)}`;
    const routes = [
      `/api/${org}/platform/workspaces`,
      `/api/${org}/platform/users/_current/refresh_tokens`,
      `/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/`,
    ];
    // Known to both replicas first, so the refusal cannot come from a cold cache.
    for (const url of [testEnv().publicUrl, replica.url]) {
      for (const credentials of [bearer, basicAuth(member)]) {
        const res = await fetch(`${url}${routes[0]!}`, { headers: { authorization: credentials } });
        expect(res.status).toBe(200);
      }
    }

    const forwarded = await fetch(`${replica.url}${routes[2]!}`, {
      headers: { authorization: bearer },
    });
    expect(forwarded.status).toBe(200);
    expect(upstream.seen).toHaveLength(1);

    const disabled = expectOk(
      await callApi(`/api/platform/organizations/${org}/disable`, admin, post()),
    );
    expect(disabled).toMatchObject({
      id: org,
      enabled: false,
      status: 'Organization Disable Complete',
    });
    await untilStatus(`${replica.url}${routes[0]!}`, bearer, 403);
    for (const route of routes) {
      for (const credentials of [bearer, basicAuth(member)]) {
        expectRefused(await callApi(route, credentials), 403, '403-23001');
      }
    }
    const onReplica = await fetch(`${replica.url}${routes[2]!}`, {
      headers: { authorization: basicAuth(member) },
    });
    expect(onReplica.status).toBe(403);
    expect(((await onReplica.json()) as { result: string }).result).toBe('403-23001');
    // The forwarded automation route refuses before the upstream sees anything.
    expect(upstream.seen).toHaveLength(1);
    // Decided before credentials are read: none at all gets the same answer.
    expectRefused(await callApi(routes[0]!), 403, '403-23001');

    // Keycloak refuses new grants in the realm by itself; the /auth proxy passes its answer on.
    const grant = await postToken(`${testEnv().publicUrl}/auth`, org, passwordGrantBody(member));
    expect(grant.status).toBe(403);
    expect(grant.json).toMatchObject({
      error: 'access_denied',
      error_description: 'Realm not enabled',
    });

    // Idempotent: a repeat answers the same record, timestamp included.
    const again = expectOk(
      await callApi(`/api/platform/organizations/${org}/disable`, admin, post()),
    );
    expect(again).toEqual(disabled);
    const kc = await keycloakAdmin();
    expect((await kc.realms.findOne({ realm: org }))?.enabled).toBe(false);
  });

  it('enables it again: the same credentials work on both replicas', async () => {
    const enabled = expectOk(
      await callApi(`/api/platform/organizations/${org}/enable`, admin, post()),
    );
    expect(enabled).toMatchObject({
      id: org,
      enabled: true,
      status: 'Organization Enable Complete',
    });
    const route = `/api/${org}/platform/workspaces`;
    await untilStatus(`${replica.url}${route}`, basicAuth(member), 200);
    expectOk(await callApi(route, basicAuth(member)));
    const grant = await postToken(`${testEnv().publicUrl}/auth`, org, passwordGrantBody(member));
    expect(grant.status).toBe(200);
    expectOk(await callApi(route, `Bearer ${String(grant.json.access_token)}`));
    const kc = await keycloakAdmin();
    expect((await kc.realms.findOne({ realm: org }))?.enabled).toBe(true);
  });

  it("ends every replica with the database's state when an older change's message arrives last", async () => {
    // `late`: disabled, then enabled by another replica that waited for the row lock, the
    // disable's message published only after the enable's (a replica slow to announce).
    // `marker`: disabled in the database, its message published after that one.
    const late = uniqueId('late-');
    const marker = uniqueId('mark-');
    for (const id of [late, marker]) {
      expectOk(await callApi('/api/platform/organizations', admin, post({ id, name: 'Late' })));
    }
    const urls = [testEnv().publicUrl, replica.url];
    // Without credentials: 401 while the organization is served, 403 once it is disabled.
    const untilAnswer = async (url: string, id: string, status: number) => {
      await expect
        .poll(
          async () =>
            (await callApi(`/api/${id}/platform/workspaces`, undefined, { base: url })).status,
          EVENTUALLY,
        )
        .toBe(status);
    };
    for (const url of urls) {
      for (const id of [late, marker]) await untilAnswer(url, id, 401);
    }
    await testDb()('organizations').where({ id: marker }).update({ enabled: false });
    const logger = createLogger('silent');
    const bus = await createReplicaBus({ redisUrl: testEnv().redisUrl, logger });
    try {
      const slow = await createOrganizationEvents({
        bus,
        keyPrefix: testEnv().redisKeyPrefix,
        logger,
        apply: () => undefined,
      });
      await slow.announce({ organizationId: late, state: 'disabled' });
      await slow.announce({ organizationId: marker, state: 'disabled' });
    } finally {
      await bus.close();
    }
    for (const url of urls) {
      // One channel, delivered in order: a replica refusing `marker` applied `late`'s message.
      await untilAnswer(url, marker, 403);
      // Refused at once, then served again as the database says: not for the minute a state
      // is trusted.
      await untilAnswer(url, late, 401);
    }
  });

  it('deletes an organization only when confirmed: realm and rows go, every replica forgets it', async () => {
    const path = `/api/platform/organizations/${org}`;
    const del = (query: string) => callApi(`${path}${query}`, admin, { method: 'DELETE' });
    expectRefused(await del(''), 400, '400-23001');
    expectRefused(await del('?confirm=other-org'), 400, '400-23001');
    expectRefused(await del(`?confirm=${org}&confirm=${org}`), 400, '400-23001');
    // The administrators' realm is no organization: it cannot be named, let alone deleted.
    const master = await callApi('/api/platform/organizations/master?confirm=master', admin, {
      method: 'DELETE',
    });
    expectRefused(master, 404, '404-00001');
    expectOk(await callApi(path, admin));

    const route = `/api/${org}/platform/workspaces`;
    const res = await fetch(`${replica.url}${route}`, {
      headers: { authorization: basicAuth(member) },
    });
    expect(res.status).toBe(200);
    const before = expectOk(await callApi(path, admin));
    const deleted = expectOk(await del(`?confirm=${org}`));
    expect(deleted).toEqual(before);
    const kc = await keycloakAdmin();
    expect(await kc.realms.findOne({ realm: org })).toBeFalsy();
    expect(await rowCounts(org)).toEqual({ organizations: 0, workspaces: 0, operations: 0 });
    await untilStatus(`${replica.url}${route}`, basicAuth(member), 404);
    expectRefused(await callApi(route, basicAuth(member)), 404, '404-00001');
    expectRefused(await del(`?confirm=${org}`), 404, '404-00001');
    expectRefused(await callApi(path, admin), 404, '404-00001');
  });

  it('deletes a workspace and an organization asked by two replicas at once: no call fails', async () => {
    // Keycloak answers 500 to the delete that loses the race for a role or a realm; the role or
    // realm is gone all the same, which is what both calls asked for. A call arriving once the
    // other is over finds no record: 404, as any later repeat.
    const fresh = await provision(admin);
    const base = `/api/platform/organizations/${fresh.org}`;
    const twice = (path: string) =>
      Promise.all([0, 1].map(() => callApi(path, admin, { method: 'DELETE' })));
    const expectDeletedOrGone = (answers: ApiResponse[], gone: string) => {
      for (const answer of answers) {
        if (answer.status === 404) expectRefused(answer, 404, gone);
        else expectOk(answer);
      }
      expect(answers.some((answer) => answer.status === 200)).toBe(true);
    };
    expectDeletedOrGone(await twice(`${base}/workspaces/ws2`), '404-00002');
    expectDeletedOrGone(await twice(`${base}?confirm=${fresh.org}`), '404-00001');
    expect(await (await keycloakAdmin()).realms.findOne({ realm: fresh.org })).toBeFalsy();
    expect(await rowCounts(fresh.org)).toEqual({ organizations: 0, workspaces: 0, operations: 0 });
  });

  it("refuses a deleted organization's tokens and cached Basic logins in one created again under its id", async () => {
    const old = await provision(admin);
    const bearer = `Bearer ${await accessTokenOf(old.member)}`;
    const route = `/api/${old.org}/platform/workspaces`;
    const status = async (url: string, authorization: string) =>
      (await fetch(`${url}${route}`, { headers: { authorization } })).status;
    // Used on both replicas first: the token verified and remembered, the Basic login cached.
    for (const url of [testEnv().publicUrl, replica.url]) {
      for (const credentials of [bearer, basicAuth(old.member)]) {
        expect(await status(url, credentials)).toBe(200);
      }
    }

    const path = `/api/platform/organizations/${old.org}?confirm=${old.org}`;
    expectOk(await callApi(path, admin, { method: 'DELETE' }));
    const again = post({ id: old.org, name: 'Life again' });
    expectOk(await callApi('/api/platform/organizations', admin, again));
    const newcomer = await createUser(old.org);
    for (const url of [testEnv().publicUrl, replica.url]) {
      // Once the replica knows the new organization (an id found absent answers so a few seconds)...
      await untilStatus(`${url}${route}`, basicAuth(newcomer), 200);
      // ...the old realm's token and login are no credentials of the new one.
      expect(await status(url, bearer)).toBe(401);
      expect(await status(url, basicAuth(old.member))).toBe(401);
    }
  });

  it('completes a delete that stopped after Keycloak', async () => {
    const half = await provision(admin);
    const kc = await keycloakAdmin();
    await kc.realms.del({ realm: half.org });
    expect((await rowCounts(half.org)).operations).toBe(2);
    // Until the delete is repeated, what needs the realm finds no organization: never a 500.
    const calls: Array<[string, string, unknown?]> = [
      ['GET', '/users'],
      ['GET', `/users/${half.member.username}`],
      ['POST', '/users', { username: uniqueId('user-'), password: 'Passw0rd-1' }],
      ['GET', '/token-lifetimes'],
      ['PATCH', '/token-lifetimes', { access_token_lifespan: 60 }],
      ['POST', '/workspaces', { id: 'ws3', name: 'W ws3' }],
    ];
    for (const [method, suffix, body] of calls) {
      const answer = await callApi(`/api/platform/organizations/${half.org}${suffix}`, admin, {
        method,
        body,
      });
      expectRefused(answer, 404, '404-00001');
    }
    const path = `/api/platform/organizations/${half.org}?confirm=${half.org}`;
    expect(expectOk(await callApi(path, admin, { method: 'DELETE' }))).toMatchObject({
      id: half.org,
    });
    expect(await rowCounts(half.org)).toEqual({ organizations: 0, workspaces: 0, operations: 0 });
  });

  it('creates an organization anew where a delete stopped after Keycloak, nothing of the old one kept', async () => {
    const half = await provision(admin);
    expectOk(await callApi(`/api/platform/organizations/${half.org}/disable`, admin, post()));
    // What DELETE does first: the realm gone, the rows still in PostgreSQL.
    await (await keycloakAdmin()).realms.del({ realm: half.org });
    const created = expectOk(
      await callApi('/api/platform/organizations', admin, post({ id: half.org, name: 'Fresh' })),
    );
    expect(created).toMatchObject({ id: half.org, name: 'Fresh', enabled: true });
    expect(await rowCounts(half.org)).toEqual({ organizations: 1, workspaces: 0, operations: 0 });
  });

  it('refuses a user in a workspace whose delete stopped after Keycloak, then completes it', async () => {
    const half = await provision(admin);
    // What DELETE .../workspaces/ws2 does first: its roles gone, its row still in PostgreSQL.
    await deleteWorkspaceRoles(await keycloakAdmin(), half.org, 'ws2');
    const users = `/api/platform/organizations/${half.org}/users`;
    const username = uniqueId('user-');
    const body = { username, password: 'Passw0rd-1', workspaces: ['ws2'] };
    expectRefused(await callApi(users, admin, post(body)), 404, '404-00002');
    // No half-made user is left: the same user in a workspace that exists is created.
    expectOk(await callApi(users, admin, post({ ...body, workspaces: ['ws1'] })));
    const workspace = `/api/platform/organizations/${half.org}/workspaces/ws2`;
    expectOk(await callApi(workspace, admin, { method: 'DELETE' }));
  });

  it('audits every change, refusals included, without secrets', async () => {
    const { org: other } = await provision(admin);
    const at = (path: string) => `${replica.url}/api/platform/organizations/${other}${path}`;
    const headers = { authorization: admin };
    expect((await fetch(at('/workspaces/ws1'), { method: 'DELETE', headers })).status).toBe(200);
    expect((await fetch(at('/disable'), { method: 'POST', headers })).status).toBe(200);
    expect((await fetch(at('/enable'), { method: 'POST', headers })).status).toBe(200);
    expect((await fetch(at(''), { method: 'DELETE', headers })).status).toBe(400);
    expect((await fetch(at(`?confirm=${other}`), { method: 'DELETE', headers })).status).toBe(200);
    const lines = log
      .split('\n')
      .filter((line) => line.includes('"audit":true') && line.includes(other))
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.map(({ action, outcome, result }) => [action, outcome, result])).toEqual([
      ['workspace.delete', 'success', undefined],
      ['organization.disable', 'success', undefined],
      ['organization.enable', 'success', undefined],
      ['organization.delete', 'failure', '400-23001'],
      ['organization.delete', 'success', undefined],
    ]);
    expect(lines[0]).toMatchObject({ target: { organization: other, workspace: 'ws1' } });
    expect(log).not.toContain(admin.slice('Basic '.length));
  });
});

describe('organization events over Redis', () => {
  it('reach every other replica once, and ignore what is not a change', async () => {
    const keyPrefix = `realmgate-orgevents:${randomBytes(4).toString('hex')}:`;
    const logger = createLogger('silent');
    const seen: Record<'a' | 'b', OrganizationChange[]> = { a: [], b: [] };
    const buses = await Promise.all(
      [1, 2].map(() => createReplicaBus({ redisUrl: testEnv().redisUrl, logger })),
    );
    const [a, b] = await Promise.all(
      (['a', 'b'] as const).map((name, i) =>
        createOrganizationEvents({
          bus: buses[i],
          keyPrefix,
          logger,
          apply: (change) => seen[name].push(change),
        }),
      ),
    );
    const raw = new Redis(testEnv().redisUrl);
    try {
      for (const junk of ['not json', 'null', '{"organizationId":"x","state":"gone","from":"y"}']) {
        await raw.publish(`${keyPrefix}organizations`, junk);
      }
      const acme = { organizationId: 'acme', state: 'disabled' } as const;
      // Redis delivers a channel's messages in the order published: once a replica has a marker
      // published after the rest, any junk, duplicate or echo of the rest has reached it before.
      const fromA = { organizationId: 'marker-a', state: 'enabled' } as const;
      const fromB = { organizationId: 'marker-b', state: 'enabled' } as const;
      await a!.announce(acme);
      await a!.announce(fromA);
      await expect.poll(() => seen.b, EVENTUALLY).toContainEqual(fromA);
      await b!.announce(fromB);
      await expect.poll(() => seen.a, EVENTUALLY).toContainEqual(fromB);
      expect(seen.a).toEqual([acme, fromA, fromB]);
      expect(seen.b).toEqual([acme, fromA, fromB]);
    } finally {
      raw.disconnect();
      await Promise.all(buses.map((bus) => bus.close()));
    }
  });
});
