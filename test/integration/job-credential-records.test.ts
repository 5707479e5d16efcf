import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, callApi } from '../helpers/api.ts';
import {
  claimsOf,
  createUser,
  createPublicClient,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
  type TestUser,
  userIdOf,
} from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { startReplica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * A job credential's record (its reach) lives as long as its session: listing or revoking
 * refresh tokens drops only the records of sessions Keycloak no longer has. Dropped early, a
 * replica that has not read the record yet (a fresh one, or any after its hour of memory)
 * admits the session's tokens with their user's whole reach. A fresh replica on ports
 * 21132/21133 reads each record from the database; one behind a Keycloak front on 21134/21135
 * lists while a credential is issued, revokes one token while another client's offline
 * sessions cannot be read, or is asked for a name while the user's online sessions cannot be.
 * Two replicas sharing Redis on 21186/21187 and 21188/21189 show that a record dropped because
 * Keycloak ended its session takes that session's access tokens along.
 */
describe("job credentials: a record outlives no session, and no list drops a live one's", () => {
  let org: string;
  let user: TestUser;
  let upstream: RecordingUpstream;

  beforeAll(async () => {
    org = await createOrganization(['ws1', 'ws2'], 1);
    user = await createUser(org, { workspaceRoles: ['ws1', 'ws2'] });
    // Another client of the realm with the password grant, as an administrator may make one.
    await createPublicClient(org, 'other-jobs', {
      // `basic` puts the user in `sub`, as the API client's tokens have it.
      defaultClientScopes: ['basic', 'roles'],
      optionalClientScopes: ['offline_access'],
    });
    upstream = await startRecordingUpstream();
  });

  afterAll(async () => {
    await upstream?.close();
    await closeTestDb();
  });

  const auth = () => `${testEnv().publicUrl}/auth`;
  const tokensPath = () => `/api/${org}/platform/users/_current/refresh_tokens`;
  const forwarded = (ws: string) => `/api/${org}/workspaces/${ws}/ita/menu/operation_list/filter/`;

  async function grant(extra: string, scope = 'openid+offline_access', client = `_${org}-api`) {
    const body = passwordGrantBody(user, extra)
      .replace('openid+offline_access', scope)
      .replace(`client_id=_${org}-api`, `client_id=${client}`);
    const res = await postToken(auth(), org, body);
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    return {
      accessToken: String(res.json.access_token),
      refreshToken: String(res.json.refresh_token),
      sid: String(claimsOf(res.json.access_token).sid),
    };
  }

  /** Keycloak's answer to a refresh grant of `client` with `refreshToken`. */
  async function refreshStatus(refreshToken: string, client = `_${org}-api`): Promise<number> {
    const body = `client_id=${client}&grant_type=refresh_token&refresh_token=${refreshToken}`;
    return (await postToken(auth(), org, body)).status;
  }

  /** The DELETE of one refresh token, by id or name: its envelope's status and result. */
  async function revokeOne(idOrName: string, authorization: string) {
    const res = await callApi(`${tokensPath()}/${idOrName}`, authorization, { method: 'DELETE' });
    return { status: res.status, result: res.body.result };
  }

  const recorded = async (sid: string) =>
    (await testDb().table('refresh_token_details').where({ session_id: sid }).first()) !==
    undefined;

  /** A write to `ws` with `token` on a replica that has read no record yet: its status. */
  async function freshWrite(ws: string, token: string): Promise<number> {
    const fresh = await startReplica(21132, { AUTOMATION_UPSTREAM_URL: upstream.url });
    try {
      const res = await fetch(`${fresh.url}${forwarded(ws)}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: '{}',
      });
      await res.arrayBuffer();
      return res.status;
    } finally {
      await fresh.gateway.close();
    }
  }

  /** A replica whose Keycloak is behind a front that can hold one of Keycloak's answers. */
  async function replicaBehindFront(env: Record<string, string> = {}) {
    const front: KeycloakFront = await startKeycloakFront(testEnv().keycloakUrl);
    const replica = await startReplica(21134, { KEYCLOAK_URL: front.url, ...env }).catch(
      async (err: unknown) => {
        await front.close();
        throw err;
      },
    );
    const close = async () => {
      await replica.gateway.close();
      await front.close();
    };
    return { front, replica, close };
  }

  it('listing with an online job credential keeps its record: its limits hold on every replica', async () => {
    // Without offline_access: an online session, not among the API client's offline ones.
    const job = await grant(
      '&realmgate_name=online-job&realmgate_workspaces=ws1&realmgate_read_only=true',
      'openid',
    );
    expect(await freshWrite('ws2', job.accessToken)).toBe(403);

    // Its own list: a GET naming no workspace, within its reach.
    const listed = await callApi(tokensPath(), `Bearer ${job.accessToken}`);
    expect(listed.status).toBe(200);

    expect(await recorded(job.sid)).toBe(true);
    expect(await freshWrite('ws2', job.accessToken)).toBe(403);
    expect(await freshWrite('ws1', job.accessToken)).toBe(403);
  });

  it('keeps the record of a job credential of another client of the realm', async () => {
    const job = await grant(
      '&realmgate_name=other-client-job&realmgate_read_only=true',
      'openid+offline_access',
      'other-jobs',
    );
    expect((await callApi(tokensPath(), basicAuth(user))).status).toBe(200);
    expect(await recorded(job.sid)).toBe(true);
  });

  it('an online job credential, not listed, is revoked by its name and ends itself by its id', async () => {
    const named = await grant('&realmgate_name=online-named&realmgate_workspaces=ws1', 'openid');
    const ending = await grant('&realmgate_name=online-ending&realmgate_read_only=true', 'openid');
    const ids = (await callApi(tokensPath(), basicAuth(user))).body.data as Array<{ id: string }>;
    expect(ids.map((t) => t.id)).not.toContain(named.sid);

    expect(await revokeOne('online-named', basicAuth(user))).toEqual({
      status: 200,
      result: '000-00000',
    });
    expect((await callApi(forwarded('ws1'), `Bearer ${named.accessToken}`)).status).toBe(401);
    expect(await refreshStatus(named.refreshToken)).toBe(400);

    // Read-only, it may still end itself (its own id), and no other session by its id.
    expect((await revokeOne(named.sid, `Bearer ${ending.accessToken}`)).status).toBe(403);
    expect((await revokeOne(ending.sid, `Bearer ${ending.accessToken}`)).status).toBe(200);
    expect((await callApi(tokensPath(), `Bearer ${ending.accessToken}`)).status).toBe(401);
    expect(await refreshStatus(ending.refreshToken)).toBe(400);
    expect(await recorded(ending.sid)).toBe(false);
    // Gone, its name names nothing.
    expect(await revokeOne('online-ending', basicAuth(user))).toMatchObject({ status: 404 });
  });

  it('a job credential of another client of the realm is revoked by its name', async () => {
    const job = await grant(
      '&realmgate_name=other-client-ended',
      'openid+offline_access',
      'other-jobs',
    );
    expect(await revokeOne('other-client-ended', basicAuth(user))).toMatchObject({ status: 200 });
    expect(await refreshStatus(job.refreshToken, 'other-jobs')).toBe(400);
    expect(await recorded(job.sid)).toBe(false);
  });

  it('drops the record of a session Keycloak ended, so its name is free again', async () => {
    const job = await grant('&realmgate_name=ended-job&realmgate_workspaces=ws1');
    const admin = await keycloakAdmin();
    await admin.realms.deleteSession({ realm: org, session: job.sid, isOffline: true });

    expect((await callApi(tokensPath(), basicAuth(user))).status).toBe(200);
    expect(await recorded(job.sid)).toBe(false);
    await grant('&realmgate_name=ended-job&realmgate_workspaces=ws1');
  });

  it("frees the name of a token revoked at Keycloak's revoke endpoint for the next grant, no list between", async () => {
    const job = await grant('&realmgate_name=revoked-at-keycloak&realmgate_workspaces=ws1');
    const revoked = await fetch(`${auth()}/realms/${org}/protocol/openid-connect/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `client_id=_${org}-api&token=${job.refreshToken}&token_type_hint=refresh_token`,
    });
    expect(revoked.status).toBe(200);
    expect(await refreshStatus(job.refreshToken)).toBe(400);
    expect(await recorded(job.sid)).toBe(true);

    const again = await grant('&realmgate_name=revoked-at-keycloak&realmgate_workspaces=ws1');
    expect(await recorded(job.sid)).toBe(false);
    expect(await recorded(again.sid)).toBe(true);
    expect(await freshWrite('ws2', again.accessToken)).toBe(403);
  });

  it("keeps the name of a live online session, and of another client's, taken", async () => {
    const online = await grant('&realmgate_name=online-live', 'openid');
    await grant('&realmgate_name=other-client-live', 'openid+offline_access', 'other-jobs');
    for (const name of ['online-live', 'other-client-live']) {
      const res = await postToken(auth(), org, passwordGrantBody(user, `&realmgate_name=${name}`));
      expect(res.status).toBe(400);
      expect(String(res.json.error_description)).toContain(`named ${name} already`);
    }
    expect(await recorded(online.sid)).toBe(true);
    expect(await refreshStatus(online.refreshToken)).toBe(200);
  });

  it("keeps a name taken while Keycloak's sessions cannot be read, and frees it once they can", async () => {
    // An online job credential ended in Keycloak: in none of its lists of the user's sessions.
    const job = await grant('&realmgate_name=ended-unread', 'openid');
    const admin = await keycloakAdmin();
    await admin.realms.deleteSession({ realm: org, session: job.sid, isOffline: false });
    const { front, replica, close } = await replicaBehindFront({ KEYCLOAK_TIMEOUT_MS: '1500' });
    const body = passwordGrantBody(user, '&realmgate_name=ended-unread');
    try {
      // The user's online sessions, read after the API client's offline ones, time out.
      front.hold(/\/users\/[^/]+\/sessions$/, 10_000);
      const refused = await postToken(`${replica.url}/auth`, org, body);
      expect(refused.status).toBe(400);
      expect(String(refused.json.error_description)).toContain('named ended-unread already');
      expect(await recorded(job.sid)).toBe(true);

      front.hold(/\/users\/[^/]+\/sessions$/, 0);
      const again = await postToken(`${replica.url}/auth`, org, body);
      expect(again.status).toBe(200);
      expect(await recorded(job.sid)).toBe(false);
    } finally {
      await close();
    }
  });

  /**
   * Ends a job credential in Keycloak behind the gateway's back and has one replica drop its
   * record (by `how`); then a replica started after that, sharing the first's Redis and never
   * having read the record, is asked to write beyond the credential's reach with its access
   * token, and with a live token of the same user. Without the re-check with Keycloak
   * (`REVOCATION_CHECK_SECONDS=off`, or Keycloak slower than its wait), only the gateway's own
   * refusal stands between the ended credential's token and its user's whole reach.
   */
  async function writesOnceDropped(name: string, how: 'list' | 'grant') {
    const job = await grant(`&realmgate_name=${name}&realmgate_workspaces=ws1`);
    const live = await grant('');
    const admin = await keycloakAdmin();
    await admin.realms.deleteSession({ realm: org, session: job.sid, isOffline: true });
    const shared = {
      AUTOMATION_UPSTREAM_URL: upstream.url,
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `${testEnv().redisKeyPrefix}records-${name}:`,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
      REVOCATION_CHECK_SECONDS: 'off',
    };
    const dropping = await startReplica(21186, shared);
    try {
      if (how === 'list') {
        const listed = await callApi(tokensPath(), basicAuth(user), { base: dropping.url });
        expect(listed.status).toBe(200);
      } else {
        const body = passwordGrantBody(user, `&realmgate_name=${name}`);
        expect((await postToken(`${dropping.url}/auth`, org, body)).status).toBe(200);
      }
    } finally {
      await dropping.gateway.close();
    }
    expect(await recorded(job.sid)).toBe(false);
    const fresh = await startReplica(21188, shared);
    try {
      const write = async (token: string) => {
        const res = await fetch(`${fresh.url}${forwarded('ws2')}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: '{}',
        });
        await res.arrayBuffer();
        return res.status;
      };
      return { ended: await write(job.accessToken), live: await write(live.accessToken) };
    } finally {
      await fresh.gateway.close();
    }
  }

  it('refuses the access tokens of an ended session whose record a list drops, on every replica', async () => {
    expect(await writesOnceDropped('ended-listed', 'list')).toEqual({ ended: 401, live: 200 });
  });

  it('refuses the access tokens of an ended session whose record a grant of its name drops', async () => {
    expect(await writesOnceDropped('ended-named-again', 'grant')).toEqual({
      ended: 401,
      live: 200,
    });
  });

  it('keeps the record of a job credential issued while the list reads Keycloak', async () => {
    const { front, replica, close } = await replicaBehindFront();
    try {
      // Keycloak has answered the list's read of the offline sessions, and the answer is held.
      const gate = front.gate(/\/users\/[^/]+\/offline-sessions\//);
      const listing = callApi(tokensPath(), basicAuth(user), { base: replica.url });
      await gate.reached;
      const job = await grant('&realmgate_name=issued-meanwhile&realmgate_workspaces=ws1');
      gate.open();
      expect((await listing).status).toBe(200);

      expect(await recorded(job.sid)).toBe(true);
      expect(await freshWrite('ws2', job.accessToken)).toBe(403);
    } finally {
      await close();
    }
  });

  it("revokes the caller's token while another client's offline sessions cannot be read", async () => {
    const admin = await keycloakAdmin();
    const { id: otherUuid } = await admin.clients.create({
      realm: org,
      clientId: 'unreadable-jobs',
      publicClient: true,
      directAccessGrantsEnabled: true,
      defaultClientScopes: ['basic', 'roles'],
      optionalClientScopes: ['offline_access'],
    });
    // A row of that client's session, not among the API client's: the revocation looks for it
    // in the user's other sessions, that client's among them.
    await grant(
      '&realmgate_name=unreadable-job&realmgate_read_only=true',
      undefined,
      'unreadable-jobs',
    );
    const mine = await grant('');
    const { front, replica, close } = await replicaBehindFront();
    // Keycloak's answer for that client's offline sessions never reaches the gateway.
    const gate = front.gate(new RegExp(`/offline-sessions/${otherUuid}$`));
    try {
      const revoked = await callApi(`${tokensPath()}/${mine.sid}`, basicAuth(user), {
        base: replica.url,
        method: 'DELETE',
      });
      expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
      const [apiClient] = await admin.clients.find({ realm: org, clientId: `_${org}-api` });
      const left = await admin.users.listOfflineSessions({
        realm: org,
        id: await userIdOf(user),
        clientId: apiClient!.id!,
      });
      expect(left.map((session) => session.id)).not.toContain(mine.sid);
    } finally {
      gate.open();
      await close();
    }
  });

  it('keeps the record of a job credential issued while every refresh token is revoked', async () => {
    const { front, replica, close } = await replicaBehindFront();
    try {
      // The sessions to end are read, the online ones last: a session opened after that lives
      // on whole (refresh-tokens.service.ts revokeAll), and so must its reach.
      const gate = front.gate(/\/users\/[^/]+\/sessions$/);
      const revoking = callApi(tokensPath(), basicAuth(user), {
        base: replica.url,
        method: 'DELETE',
      });
      await gate.reached;
      const job = await grant('&realmgate_name=issued-during-revoke&realmgate_workspaces=ws1');
      gate.open();
      expect((await revoking).status).toBe(200);

      expect(await recorded(job.sid)).toBe(true);
      expect(await freshWrite('ws2', job.accessToken)).toBe(403);
    } finally {
      await close();
    }
  });
});
