import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, callApi } from '../helpers/api.ts';
import { requestFrom } from '../helpers/from-address.ts';
import {
  claimsOf,
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  uniqueId,
  userIdOf,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { TOKEN_NAME } from '../../src/auth-proxy/job-credentials.ts';

/**
 * Job credentials (issue 32): a refresh token issued with a name, a reach (workspaces,
 * read-only) and a shorter lifetime, enforced on the forwarded route and the express routes of
 * two replicas sharing Redis, listed with its last use, revoked by name. The test gateway (no
 * upstream: the built-in operation list) serves the express workspace route. Ports 21030/21040,
 * and 21050 for a replica started late.
 */
describe('job credentials: a named refresh token with a narrower reach', () => {
  let org: string;
  let user: TestUser;
  let upstream: RecordingUpstream;
  const replicas: Replica[] = [];

  beforeAll(async () => {
    org = await createOrganization(['ws1', 'ws2'], 1);
    user = await createUser(org, { workspaceRoles: ['ws1', 'ws2'] });
    upstream = await startRecordingUpstream();
    const shared = {
      AUTOMATION_UPSTREAM_URL: upstream.url,
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}jobs:`,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
    };
    replicas.push(await startReplica(21030, shared), await startReplica(21040, shared));
  });

  afterAll(async () => {
    for (const replica of replicas) await replica.gateway.close();
    await upstream?.close();
    await closeTestDb();
  });

  const tokenUrl = (base: string) => `${base}/auth`;

  async function grant(extra: string, base = testEnv().publicUrl) {
    return postToken(tokenUrl(base), org, passwordGrantBody(user, extra));
  }

  async function refresh(refreshToken: string, base = testEnv().publicUrl) {
    return postToken(
      tokenUrl(base),
      org,
      `client_id=_${org}-api&grant_type=refresh_token&refresh_token=${refreshToken}`,
    );
  }

  async function call(base: string, path: string, token: string, method = 'GET') {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: method === 'GET' ? undefined : '{}',
    });
    const text = await res.text();
    return {
      status: res.status,
      body: (text.startsWith('{') ? JSON.parse(text) : {}) as Record<string, unknown>,
    };
  }

  const forwarded = (ws: string) => `/api/${org}/workspaces/${ws}/ita/menu/operation_list/filter/`;
  const tokensPath = () => `/api/${org}/platform/users/_current/refresh_tokens`;

  /** The ids of the user's offline sessions of the organization's API client, as Keycloak has them. */
  async function offlineIds(): Promise<string[]> {
    const admin = await keycloakAdmin();
    const userId = await userIdOf(user);
    const clientId = (await admin.clients.find({ realm: org, clientId: `_${org}-api` }))[0]!.id!;
    const sessions = await admin.users.listOfflineSessions({ realm: org, id: userId, clientId });
    return sessions.map((s) => String(s.id));
  }

  async function listed() {
    const res = await callApi(tokensPath(), basicAuth(user));
    expect(res.status).toBe(200);
    return res.body.data as Array<Record<string, unknown>>;
  }

  it('issues a named, one-workspace, read-only token: Keycloak answers, never seeing the fields', async () => {
    const issued = await grant(
      '&realmgate_name=nightly-ci&realmgate_workspaces=ws1&realmgate_read_only=true' +
        '&realmgate_expires_in=86400',
    );
    expect(issued.status).toBe(200);
    // Keycloak's answer as it was: every field of spec 2.2, nothing of ours.
    expect(Object.keys(issued.json).sort()).toEqual(
      [
        'access_token',
        'expires_in',
        'id_token',
        'not-before-policy',
        'refresh_expires_in',
        'refresh_token',
        'scope',
        'session_state',
        'token_type',
      ].sort(),
    );
    const sessionId = String(claimsOf(issued.json.access_token).sid);
    const access = String(issued.json.access_token);

    // Its access tokens, and those of a refresh grant, on every replica.
    const refreshed = await refresh(String(issued.json.refresh_token), replicas[1]!.url);
    expect(refreshed.status).toBe(200);
    for (const token of [access, String(refreshed.json.access_token)]) {
      for (const replica of replicas) {
        // That workspace's GETs: the forwarded route and the express list.
        expect((await call(replica.url, forwarded('ws1'), token)).status).toBe(200);
        const workspaces = await call(replica.url, `/api/${org}/platform/workspaces`, token);
        expect(workspaces.status).toBe(200);
        expect((workspaces.body.data as Array<{ id: string }>).map((w) => w.id)).toEqual(['ws1']);
        // Elsewhere: another workspace, on the forwarded route.
        const outside = await call(replica.url, forwarded('ws2'), token);
        expect(outside.status).toBe(403);
        expect(outside.body.result).toBe('403-30001');
        // Writes: on the forwarded route and on an express route.
        const write = await call(replica.url, forwarded('ws1'), token, 'POST');
        expect(write.status).toBe(403);
        expect(write.body.result).toBe('403-30002');
        // Its user's refresh tokens are its account's, beyond its workspaces.
        const revokeAll = await call(replica.url, tokensPath(), token, 'DELETE');
        expect(revokeAll.status).toBe(403);
        expect(revokeAll.body.result).toBe('403-30001');
      }
      // The express workspace route (the built-in operation list of the test gateway).
      const base = testEnv().publicUrl;
      expect((await call(base, forwarded('ws1'), token)).status).toBe(200);
      const express = await call(base, forwarded('ws2'), token);
      expect(express.status).toBe(403);
      expect(express.body.result).toBe('403-30001');
    }
    // Refused calls never reached the automation service.
    expect(upstream.seen.some((seen) => seen.url.includes('/ws2/'))).toBe(false);
    expect(upstream.seen.some((seen) => seen.method !== 'GET')).toBe(false);

    const record = (await listed()).find((token) => token.id === sessionId);
    expect(record).toMatchObject({ name: 'nightly-ci', workspaces: ['ws1'], read_only: true });
    // The lifetime given: a day, not Keycloak's year.
    const expiry = Date.parse(String(record!.expire_timestamp));
    expect(expiry).toBeGreaterThan(Date.now() + 86_000_000);
    expect(expiry).toBeLessThanOrEqual(Date.now() + 86_400_000);
  });

  it('shows the last use, from whichever client address used it', async () => {
    const issued = await grant('&realmgate_name=deploy-job');
    expect(issued.status).toBe(200);
    const token = String(issued.json.access_token);
    const sessionId = String(claimsOf(token).sid);
    const lastUse = async () =>
      (await listed()).find((listedToken) => listedToken.id === sessionId)?.last_use as
        Record<string, string> | null | undefined;
    expect(await lastUse()).toBeNull();

    const before = Date.now();
    const first = await requestFrom('127.0.0.2', `${replicas[0]!.url}${forwarded('ws1')}`, {
      headers: { authorization: `Bearer ${token}`, 'user-agent': 'ci-runner/1.0' },
    });
    expect(first.status).toBe(200);
    await expect.poll(lastUse, EVENTUALLY).toMatchObject({
      client_address: '127.0.0.2',
      user_agent: 'ci-runner/1.0',
    });
    expect(Date.parse((await lastUse())!.timestamp!)).toBeGreaterThanOrEqual(before - 1000);

    // Written at most once a minute per session: the next use, from another address and
    // another replica, shows once a minute has passed. Pretend it has: the row's time goes back.
    await testDb()
      .table('refresh_token_details')
      .where({ session_id: sessionId })
      .update({ last_used_at: new Date(Date.now() - 61_000) });
    const second = await requestFrom(
      '127.0.0.3',
      `${replicas[1]!.url}/api/${org}/platform/workspaces`,
      {
        headers: { authorization: `Bearer ${token}`, 'user-agent': 'laptop/2.0' },
      },
    );
    expect(second.status).toBe(200);
    await expect.poll(lastUse, EVENTUALLY).toMatchObject({
      client_address: '127.0.0.3',
      user_agent: 'laptop/2.0',
    });
    // Never the token.
    expect(JSON.stringify(await listed())).not.toContain(token);
  });

  it('revokes by name: its access tokens are refused at once on every replica', async () => {
    const issued = await grant('&realmgate_name=to-revoke&realmgate_workspaces=ws2');
    expect(issued.status).toBe(200);
    const token = String(issued.json.access_token);
    for (const replica of replicas) {
      expect((await call(replica.url, forwarded('ws2'), token)).status).toBe(200);
    }
    // Through one replica; the other learns it over Redis.
    const revoked = await fetch(`${replicas[0]!.url}${tokensPath()}/to-revoke`, {
      method: 'DELETE',
      headers: { authorization: basicAuth(user) },
    });
    expect(revoked.status).toBe(200);
    for (const replica of replicas) {
      await expect
        .poll(async () => (await call(replica.url, forwarded('ws2'), token)).status, EVENTUALLY)
        .toBe(401);
    }
    expect((await refresh(String(issued.json.refresh_token))).status).toBe(400);
    expect((await listed()).some((listedToken) => listedToken.name === 'to-revoke')).toBe(false);
    // The name is free again.
    expect((await grant('&realmgate_name=to-revoke')).status).toBe(200);
  });

  it('a read-only token revokes its own session, and only its own: ending itself is no write', async () => {
    const other = await grant('&realmgate_name=other-job');
    const otherId = String(claimsOf(other.json.access_token).sid);
    const readOnly = await grant('&realmgate_name=self-ending&realmgate_read_only=true');
    const narrowed = await grant(
      '&realmgate_name=self-ending-ws&realmgate_read_only=true&realmgate_workspaces=ws1',
    );
    for (const [issued, name, refusal] of [
      [readOnly, 'self-ending', '403-30002'],
      // Narrowed to workspaces as well: its user's other sessions are beyond them.
      [narrowed, 'self-ending-ws', '403-30001'],
    ] as const) {
      expect(issued.status).toBe(200);
      const token = String(issued.json.access_token);
      const ownId = String(claimsOf(token).sid);
      expect(await offlineIds()).toEqual(expect.arrayContaining([ownId, otherId]));
      // Another session of the user, all of them, or its own by name: still writes, refused.
      for (const path of [`${tokensPath()}/${otherId}`, tokensPath(), `${tokensPath()}/${name}`]) {
        const refused = await call(replicas[1]!.url, path, token, 'DELETE');
        expect(refused.status, path).toBe(403);
        expect(refused.body.result, path).toBe(refusal);
      }
      // Its own session, by its id (what `realmgate logout` sends): ended.
      const ended = await call(replicas[1]!.url, `${tokensPath()}/${ownId}`, token, 'DELETE');
      expect(ended.status, JSON.stringify(ended.body)).toBe(200);
      const left = await offlineIds();
      expect(left).not.toContain(ownId);
      expect(left).toContain(otherId);
      for (const replica of replicas) {
        await expect
          .poll(async () => (await call(replica.url, forwarded('ws1'), token)).status, EVENTUALLY)
          .toBe(401);
      }
      expect((await refresh(String(issued.json.refresh_token))).status).toBe(400);
    }
    // The other session lives on.
    expect(
      (await call(replicas[0]!.url, forwarded('ws1'), String(other.json.access_token))).status,
    ).toBe(200);
    expect((await refresh(String(other.json.refresh_token))).status).toBe(200);
  });

  it('a read-only token ending its own session never ends another named like it', async () => {
    // A read-only token of an online session (no offline_access): its session is no offline one.
    // Keycloak's session ids are base64url and may start with "_" or "-", which no name does:
    // sessions are drawn until one's id can be a name (1 in 32 is not).
    const readOnlyGrant = () =>
      postToken(
        tokenUrl(testEnv().publicUrl),
        org,
        passwordGrantBody(user, '&realmgate_read_only=true').replace('+offline_access', ''),
      );
    let readOnly = await readOnlyGrant();
    for (let drawn = 1; ; drawn++) {
      expect(readOnly.status).toBe(200);
      if (TOKEN_NAME.test(String(claimsOf(readOnly.json.access_token).sid))) break;
      expect(drawn).toBeLessThan(10);
      readOnly = await readOnlyGrant();
    }
    const token = String(readOnly.json.access_token);
    const ownId = String(claimsOf(token).sid);
    // Another job credential of the user, named as the read-only token's session is.
    const namesake = await grant(`&realmgate_name=${encodeURIComponent(ownId)}`);
    expect(namesake.status, `${ownId}: ${JSON.stringify(namesake.json)}`).toBe(200);
    const namesakeId = String(claimsOf(namesake.json.access_token).sid);
    expect(await offlineIds()).toContain(namesakeId);
    // Its own session's id is what the path names, its own online session: ended, not the
    // session named so.
    const ended = await call(replicas[1]!.url, `${tokensPath()}/${ownId}`, token, 'DELETE');
    expect(ended.status, JSON.stringify(ended.body)).toBe(200);
    expect((await refresh(String(readOnly.json.refresh_token))).status).toBe(400);
    expect(await offlineIds()).toContain(namesakeId);
    expect((await refresh(String(namesake.json.refresh_token))).status).toBe(200);
  });

  it('refuses invalid fields with 400 in the token endpoint shape, issuing nothing', async () => {
    const admin = await keycloakAdmin();
    const userId = await userIdOf(user);
    const sessions = async () =>
      (
        await admin.users.listOfflineSessions({
          realm: org,
          id: userId,
          clientId: (await admin.clients.find({ realm: org, clientId: `_${org}-api` }))[0]!.id!,
        })
      ).length;
    const count = await sessions();
    const cases = [
      ['&realmgate_name=has space', 'realmgate_name'],
      ['&realmgate_name=5f0c2e8a-1111-2222-3333-444455556666', 'session id'],
      ['&realmgate_workspaces=ws1&realmgate_workspaces=BAD!', 'realmgate_workspaces'],
      ['&realmgate_read_only=yes', 'realmgate_read_only'],
      ['&realmgate_expires_in=10', 'realmgate_expires_in'],
      ['&realmgate_expires_in=1&realmgate_expires_in=2', 'more than once'],
      ['&realmgate_scope=all', 'Unknown field'],
      // Known only once Keycloak has answered: the session it opened is ended.
      ['&realmgate_workspaces=ws1,ws3', 'not a workspace of yours: ws3'],
      ['&realmgate_name=deploy-job', 'already'],
    ] as const;
    for (const [extra, said] of cases) {
      const res = await grant(extra);
      expect(res.status, extra).toBe(400);
      expect(res.json.error, extra).toBe('invalid_request');
      expect(String(res.json.error_description), extra).toContain(said);
      expect(res.json.refresh_token, extra).toBeUndefined();
    }
    // In the query string, where Keycloak ignores them: refused too, not a token of the
    // user's whole reach that the client takes for the narrow one it asked for.
    for (const query of ['realmgate_read_only=true', 'realmgate_workspaces=ws1']) {
      const res = await fetch(
        `${testEnv().publicUrl}/auth/realms/${org}/protocol/openid-connect/token?${query}`,
        {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: passwordGrantBody(user),
        },
      );
      const json = (await res.json()) as Record<string, unknown>;
      expect(res.status, query).toBe(400);
      expect(json.error, query).toBe('invalid_request');
      expect(String(json.error_description), query).toContain('query');
      expect(json.refresh_token, query).toBeUndefined();
    }
    expect(await sessions()).toBe(count);
    // A refresh grant takes none of them.
    const issued = await grant('');
    const res = await refresh(`${String(issued.json.refresh_token)}&realmgate_read_only=true`);
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('invalid_request');
  });

  it('ends a token whose lifetime given at issuance is over: refresh and access refused', async () => {
    const issued = await grant('&realmgate_name=short-lived&realmgate_expires_in=60');
    expect(issued.status).toBe(200);
    const token = String(issued.json.access_token);
    const sessionId = String(claimsOf(token).sid);
    expect((await call(replicas[0]!.url, forwarded('ws1'), token)).status).toBe(200);
    // Sixty seconds later, as far as the record says (the replicas' in-process copy is the
    // record's; a fresh replica reads it from the database).
    await testDb()
      .table('refresh_token_details')
      .where({ session_id: sessionId })
      .update({
        expires_at: new Date(Date.now() - 1000),
      });
    const late = await startReplica(21050, { AUTOMATION_UPSTREAM_URL: upstream.url });
    try {
      const refused = await call(late.url, forwarded('ws1'), token);
      expect(refused.status).toBe(401);
      expect(refused.body.result).toBe('401-00002');
      const renewed = await refresh(String(issued.json.refresh_token), late.url);
      expect(renewed.status).toBe(400);
      expect(renewed.json).toMatchObject({ error: 'invalid_grant' });
    } finally {
      await late.gateway.close();
    }
    // Ended in Keycloak too: no longer listed.
    await expect
      .poll(async () => (await listed()).some((t) => t.id === sessionId), EVENTUALLY)
      .toBe(false);
  });

  it('issues no job credential to a user whose id is no printable ASCII: no lifetime unchecked', async () => {
    // A user id that is no printable ASCII, as a user-storage provider's may be (`f:<provider>:`
    // and its own id); here a local user's, as Keycloak keeps the id a realm import gives.
    const admin = await keycloakAdmin();
    const federated: TestUser = {
      realm: org,
      username: `${uniqueId('fed-')}`,
      password: randomBytes(12).toString('base64url'),
      otpSecret: undefined,
    };
    const id = `störe-${randomBytes(4).toString('hex')}`;
    await admin.realms.partialImport({
      realm: org,
      rep: {
        ifResourceExists: 'FAIL',
        users: [
          {
            id,
            username: federated.username,
            enabled: true,
            credentials: [{ type: 'password', value: federated.password, temporary: false }],
            // What a created user is given (offline_access among them); an imported one is not.
            realmRoles: [`default-roles-${org.toLowerCase()}`],
          },
        ],
      },
    });
    const issued = await postToken(
      tokenUrl(testEnv().publicUrl),
      org,
      passwordGrantBody(federated, '&realmgate_name=short-lived-fed&realmgate_expires_in=60'),
    );
    // The refresh grant checks a job credential's lifetime only for a user id it can read (a
    // printable ASCII `sub`): such a user is given none, rather than one never checked.
    expect(issued.status, JSON.stringify(issued.json)).toBe(503);
    const refused = await postToken(
      tokenUrl(testEnv().publicUrl),
      org,
      passwordGrantBody(federated, '&realmgate_expires_in=60'),
    );
    expect(refused.status).toBe(503);
    const clientId = (await admin.clients.find({ realm: org, clientId: `_${org}-api` }))[0]!.id!;
    await expect
      .poll(
        async () => (await admin.users.listOfflineSessions({ realm: org, id, clientId })).length,
        EVENTUALLY,
      )
      .toBe(0);
  });

  it('ends a token past its lifetime however its signature is written: Keycloak reads a padded one as the same token', async () => {
    const issued = await grant('&realmgate_name=short-lived-padded&realmgate_expires_in=60');
    expect(issued.status).toBe(200);
    const refreshToken = String(issued.json.refresh_token);
    const sessionId = String(claimsOf(issued.json.access_token).sid);
    const [header, payload, signature] = refreshToken.split('.') as [string, string, string];
    // Keycloak decodes the signature part leniently (padding, anything after it, the standard
    // alphabet, a line break, trailing dots): each of these is the same token to it.
    const sameToKeycloak = [
      `${refreshToken}==`,
      `${refreshToken}=`,
      `${refreshToken}==x`,
      `${refreshToken}.`,
      `${header}.${payload}.${Buffer.from(signature, 'base64url').toString('base64')}`,
      `${header}.${payload}.${signature.slice(0, 10)}\n${signature.slice(10)}`,
    ];
    const direct = await postToken(
      testEnv().keycloakUrl,
      org,
      `client_id=_${org}-api&grant_type=refresh_token&refresh_token=${encodeURIComponent(sameToKeycloak[0]!)}`,
    );
    expect(direct.status).toBe(200);
    await testDb()
      .table('refresh_token_details')
      .where({ session_id: sessionId })
      .update({ expires_at: new Date(Date.now() - 1000) });
    const late = await startReplica(21050, { AUTOMATION_UPSTREAM_URL: upstream.url });
    try {
      for (const token of sameToKeycloak) {
        const renewed = await refresh(encodeURIComponent(token), late.url);
        expect(renewed.status, `variant ${sameToKeycloak.indexOf(token)}`).toBe(400);
        expect(renewed.json).toMatchObject({ error: 'invalid_grant' });
      }
    } finally {
      await late.gateway.close();
    }
  });

  it('an unrestricted token behaves as before', async () => {
    const issued = await grant('');
    expect(issued.status).toBe(200);
    const token = String(issued.json.access_token);
    for (const replica of replicas) {
      expect((await call(replica.url, forwarded('ws2'), token)).status).toBe(200);
      expect((await call(replica.url, forwarded('ws1'), token, 'POST')).status).toBe(200);
      const workspaces = await call(replica.url, `/api/${org}/platform/workspaces`, token);
      expect((workspaces.body.data as Array<{ id: string }>).map((w) => w.id)).toEqual([
        'ws1',
        'ws2',
      ]);
    }
    const record = (await listed()).find((t) => t.id === claimsOf(token).sid);
    expect(record).toMatchObject({ name: null, workspaces: null, read_only: false });
  });
});
