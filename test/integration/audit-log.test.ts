import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyChain, type AuditRecord } from '../../src/audit/audit-chain.ts';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import { dpopKey, dpopProof, postForm, type DpopKey } from '../helpers/dpop.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { claimsOf, createUser, passwordGrantBody, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { startDatabaseRelay, type DatabaseRelay } from '../helpers/tcp-front.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * The audit log with the real stack: two replicas record each `/api` decision (Basic, Bearer,
 * DPoP, refusals and their reasons) and each token grant into one ordered, verifiable log per
 * organization; no secret is stored; a replica whose database is cut spools its records and
 * writes every one, in order, once it is back, and says in readiness and a metric what it could
 * not keep. Ports 19800-19807 (replicas), 19809 (the database relay).
 */
describe('audit log', () => {
  const publicUrl = testEnv().publicUrl;
  let a: Replica;
  let b: Replica;
  let org: string;
  let member: TestUser;
  let key: DpopKey;
  /** Every secret a test sent: none may be stored. */
  const secrets: string[] = [];

  beforeAll(async () => {
    const shared = {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: `realmgate-audit-log:${randomBytes(4).toString('hex')}:`,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
    };
    [a, b] = await Promise.all([startReplica(19800, shared), startReplica(19802, shared)]);
    org = await createOrganization(['ws1', 'ws2']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
    key = await dpopKey();
    secrets.push(member.password);
  });

  afterAll(async () => {
    await a?.gateway.close();
    await b?.gateway.close();
    await closeTestDb();
  });

  /** The log of `log` in order, as stored. */
  async function logOf(log: string): Promise<AuditRecord[]> {
    const rows = await testDb()<AuditRow>('audit_log').where({ org: log }).orderBy('seq');
    return rows.map(recordOf);
  }

  /** The record of the request `requestId` answered, once written. */
  async function recordOfRequest(log: string, requestId: string | null): Promise<AuditRecord> {
    let found: AuditRecord | undefined;
    await expect
      .poll(async () => {
        found = (await logOf(log)).find((r) => r.requestId === requestId);
        return found;
      }, EVENTUALLY)
      .toBeDefined();
    return found!;
  }

  async function call(replica: Replica, path: string, authorization?: string, headers = {}) {
    const res = await callApi(path, authorization, { base: replica.url, headers });
    return { status: res.status, requestId: res.headers.get('x-request-id') };
  }

  async function grant(replica: Replica, body: string, proofKey?: DpopKey) {
    const url = `${publicUrl}/auth/realms/${org}/protocol/openid-connect/token`;
    const { status, json, headers, proof } = await postForm(replica.url, url, body, proofKey);
    for (const name of ['access_token', 'refresh_token', 'id_token']) {
      if (typeof json[name] === 'string') secrets.push(json[name]);
    }
    if (proof) secrets.push(proof);
    return { status, json, requestId: headers.get('x-request-id') };
  }

  const workspaces = () => `/api/${org}/platform/workspaces`;
  const operations = (ws: string) => `/api/${org}/workspaces/${ws}/ita/menu/operation_list/filter/`;

  it('records Basic calls: the caller, and for a wrong password the user name tried and the reason', async () => {
    const ok = await call(a, workspaces(), basicAuth(member));
    expect(ok.status).toBe(200);
    expect(await recordOfRequest(org, ok.requestId)).toMatchObject({
      action: 'api.request',
      outcome: 'success',
      actorRealm: org,
      actorName: member.username,
      credential: 'basic',
      method: 'GET',
      route: '/api/{organization_id}/platform/workspaces',
      path: workspaces(),
      status: 200,
      result: null,
      reason: null,
      address: '127.0.0.1',
    });

    const wrong = `wrong-${randomBytes(6).toString('hex')}`;
    secrets.push(wrong);
    const refused = await call(
      b,
      workspaces(),
      basicAuth({ username: member.username, password: wrong }),
    );
    expect(refused.status).toBe(401);
    expect(await recordOfRequest(org, refused.requestId)).toMatchObject({
      outcome: 'failure',
      actorId: null,
      actorName: member.username,
      credential: 'basic',
      status: 401,
      result: '401-00002',
      reason: 'wrong_password',
    });

    const none = await call(a, workspaces());
    expect(await recordOfRequest(org, none.requestId)).toMatchObject({
      credential: 'none',
      status: 401,
      reason: 'missing',
    });
  });

  it('records Bearer calls of a job credential: its name, its token (jti hashed), a refusal outside its reach and a missing role', async () => {
    const issued = await grant(
      a,
      passwordGrantBody(member, '&realmgate_name=nightly&realmgate_workspaces=ws1'),
    );
    expect(issued.status).toBe(200);
    const token = String(issued.json.access_token);
    expect(await recordOfRequest(org, issued.requestId)).toMatchObject({
      action: 'token.grant',
      outcome: 'success',
      actorName: member.username,
      clientId: `_${org}-api`,
      jobCredential: 'nightly',
      status: 200,
      details: { grantType: 'password', jobWorkspaces: ['ws1'] },
    });

    const ok = await call(b, operations('ws1'), `Bearer ${token}`);
    expect(ok.status).toBe(200);
    const jti = String(claimsOf(token).jti);
    expect(await recordOfRequest(org, ok.requestId)).toMatchObject({
      outcome: 'success',
      actorName: member.username,
      credential: 'bearer',
      clientId: `_${org}-api`,
      jobCredential: 'nightly',
      jtiSha256: createHash('sha256').update(jti).digest('hex'),
      workspace: 'ws1',
      status: 200,
    });

    const outside = await call(a, operations('ws2'), `Bearer ${token}`);
    expect(outside.status).toBe(403);
    expect(await recordOfRequest(org, outside.requestId)).toMatchObject({
      outcome: 'failure',
      workspace: 'ws2',
      result: '403-30001',
      reason: 'out_of_reach',
    });

    const plain = await grant(b, passwordGrantBody(member));
    const noRole = await call(b, operations('ws2'), `Bearer ${String(plain.json.access_token)}`);
    expect(noRole.status).toBe(403);
    expect(await recordOfRequest(org, noRole.requestId)).toMatchObject({
      credential: 'bearer',
      result: '403-00001',
      reason: 'missing_role',
    });

    const wrong = await grant(a, passwordGrantBody({ ...member, password: 'not-the-password' }));
    secrets.push('not-the-password');
    expect(wrong.status).toBe(401);
    expect(await recordOfRequest(org, wrong.requestId)).toMatchObject({
      action: 'token.grant',
      outcome: 'failure',
      actorName: member.username,
      status: 401,
      reason: 'wrong_credentials',
    });
  });

  it('records DPoP calls with the key thumbprint, and a replayed proof as such', async () => {
    const issued = await grant(a, passwordGrantBody(member), key);
    expect(issued.status).toBe(200);
    const token = String(issued.json.access_token);
    const proof = await dpopProof(key, {
      method: 'GET',
      url: `${publicUrl}${workspaces()}`,
      accessToken: token,
    });
    secrets.push(proof);
    const ok = await call(a, workspaces(), `DPoP ${token}`, { dpop: proof });
    expect(ok.status).toBe(200);
    expect(await recordOfRequest(org, ok.requestId)).toMatchObject({
      credential: 'dpop',
      jkt: key.thumbprint,
      outcome: 'success',
    });
    const replayed = await call(b, workspaces(), `DPoP ${token}`, { dpop: proof });
    expect(replayed.status).toBe(401);
    expect(await recordOfRequest(org, replayed.requestId)).toMatchObject({
      credential: 'dpop',
      reason: 'replayed_proof',
    });
  });

  it('keeps a call naming no organization in master log, not in a log of that name', async () => {
    const ghost = `ghost${randomBytes(3).toString('hex')}`;
    const res = await call(a, `/api/${ghost}/platform/workspaces`, basicAuth(member));
    expect(res.status).toBe(404);
    expect(await recordOfRequest('master', res.requestId)).toMatchObject({
      reason: 'unknown_organization',
      details: { organization: ghost },
    });
    expect(await logOf(ghost)).toEqual([]);
  });

  it('two replicas writing at once keep one ordered log whose chain verifies', async () => {
    const token = String((await grant(a, passwordGrantBody(member))).json.access_token);
    const calls = await Promise.all(
      Array.from({ length: 200 }, (_, i) => call(i % 2 ? a : b, workspaces(), `Bearer ${token}`)),
    );
    const ids = new Set(calls.map((c) => c.requestId));
    await expect
      .poll(async () => (await logOf(org)).filter((r) => ids.has(r.requestId)).length, EVENTUALLY)
      .toBe(200);
    const log = await logOf(org);
    expect(log.map((r) => r.seq)).toEqual(log.map((_, i) => i + 1));
    expect(verifyChain(log)).toBeUndefined();
  });

  it('records a token grant the gateway refused before Keycloak: a form it could not read', async () => {
    // A password in a body the form's reader refuses (a broken percent escape, a charset Keycloak
    // would read otherwise): a failed grant like any other, and still no field of it kept.
    const password = randomBytes(9).toString('base64url');
    secrets.push(password);
    const broken = await grant(a, `${passwordGrantBody({ ...member, password })}%zz`);
    expect(broken).toMatchObject({ status: 400, json: { error: 'invalid_request' } });
    const url = `${b.url}/auth/realms/${org}/protocol/openid-connect/token`;
    const utf16 = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-16be' },
      body: passwordGrantBody(member),
    });
    expect(utf16.status).toBe(400);
    for (const requestId of [broken.requestId, utf16.headers.get('x-request-id')]) {
      const record = await recordOfRequest(org, requestId);
      expect(record).toMatchObject({
        action: 'token.grant',
        outcome: 'failure',
        actorName: null,
        status: 400,
        reason: 'invalid_request',
        details: {},
      });
    }
  });

  it('stores no password, token, secret or proof, and no export shows one', async () => {
    const stored = (
      await testDb().raw<{ rows: { text: string }[] }>(
        "select string_agg(audit_log::text, E'\\n') as text from audit_log where org in (?, 'master')",
        [org],
      )
    ).rows[0]!.text;
    // Each export format of the organization's log, read by a platform administrator.
    const admin = await createUser('master');
    // One after another: an organization's exports at once are bounded (long-reads.ts).
    const exports: string[] = [];
    for (const format of ['jsonl', 'csv', 'ocsf']) {
      const path = `/api/platform/organizations/${org}/audit-log/export?format=${format}`;
      const res = await fetch(`${a.url}${path}`, {
        headers: { authorization: basicAuth(admin) },
      });
      expect(res.status).toBe(200);
      exports.push(await res.text());
    }
    for (const text of [stored, ...exports]) {
      expect(text).toContain(member.username);
      for (const secret of [...secrets, admin.password, testEnv().gatewayClientSecret]) {
        expect(text).not.toContain(secret);
      }
    }
  });

  describe('a database outage', () => {
    let front: DatabaseRelay;
    let upstream: RecordingUpstream;
    let spooling: Replica;
    let small: Replica;
    // Forwarded to the automation service: a call that needs no database, as most do.
    const forwarded = () => `/api/${org}/workspaces/ws1/ita/jobs`;

    beforeAll(async () => {
      front = await startDatabaseRelay(19809);
      upstream = await startRecordingUpstream();
      const settings = { DATABASE_URL: front.databaseUrl, AUTOMATION_UPSTREAM_URL: upstream.url };
      [spooling, small] = await Promise.all([
        startReplica(19804, settings),
        startReplica(19806, { ...settings, AUDIT_SPOOL_MAX_RECORDS: '100' }),
      ]);
    });

    afterAll(async () => {
      await front?.restore().catch(() => undefined);
      await spooling?.gateway.close();
      await small?.gateway.close();
      await upstream?.close();
      await front?.cut();
    });

    it('under load, every record is written once the database is back, in order', async () => {
      const token = String((await grant(spooling, passwordGrantBody(member))).json.access_token);
      // Known before the cut: the organization, the token, its session's reach.
      expect((await call(spooling, forwarded(), `Bearer ${token}`)).status).toBe(200);
      await front.cut();
      const sent: (string | null)[] = [];
      for (let round = 0; round < 20; round++) {
        const calls = await Promise.all(
          Array.from({ length: 20 }, () => call(spooling, forwarded(), `Bearer ${token}`)),
        );
        expect(calls.map((c) => c.status)).toEqual(calls.map(() => 200));
        sent.push(...calls.map((c) => c.requestId));
      }
      // Once a write has failed (the next tick of the writer's interval).
      const readiness = async () => {
        const res = await fetch(`${spooling.url}/readyz`);
        return ((await res.json()) as { data: Record<string, string> }).data.audit_log;
      };
      await expect.poll(readiness, EVENTUALLY).toBe('degraded');

      await front.restore();
      const ids = new Set(sent);
      await expect
        .poll(async () => (await logOf(org)).filter((r) => ids.has(r.requestId)).length, EVENTUALLY)
        .toBe(sent.length);
      const log = await logOf(org);
      // In the order recorded: each round's calls after the round before.
      const seqOf = new Map(log.map((r) => [r.requestId, r.seq]));
      for (let round = 1; round < 20; round++) {
        const before = Math.max(
          ...sent.slice((round - 1) * 20, round * 20).map((id) => seqOf.get(id)!),
        );
        const after = Math.min(
          ...sent.slice(round * 20, (round + 1) * 20).map((id) => seqOf.get(id)!),
        );
        expect(after).toBeGreaterThan(before);
      }
      expect(verifyChain(log)).toBeUndefined();
      await expect.poll(readiness, EVENTUALLY).toBe('up');
    });

    it('what a full spool cannot keep is counted and said in readiness', async () => {
      const token = String((await grant(small, passwordGrantBody(member))).json.access_token);
      const warm = await call(small, forwarded(), `Bearer ${token}`);
      expect(warm.status).toBe(200);
      // Written before the cut: the spool is empty when it comes.
      await recordOfRequest(org, warm.requestId);
      await front.cut();
      for (let round = 0; round < 15; round++) {
        await Promise.all(
          Array.from({ length: 10 }, () => call(small, forwarded(), `Bearer ${token}`)),
        );
      }
      const metrics = await (
        await fetch(`http://127.0.0.1:${small.config.ADMIN_PORT}/metrics`)
      ).text();
      expect(metrics).toContain('realmgate_audit_records_total{outcome="lost"} 50');
      const ready = await fetch(`http://127.0.0.1:${small.config.ADMIN_PORT}/readyz`);
      expect(
        ((await ready.json()) as { data: Record<string, unknown> }).data.audit_log,
      ).toMatchObject({ status: 'degraded', spooled: 100, lost: 50 });
      await front.restore();
    });
  });
});
