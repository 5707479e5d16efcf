import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../src/audit/audit-chain.ts';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import {
  claimsOf,
  createUser,
  madeUpToken,
  passwordGrantBody,
  postToken,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * What the gateway refuses on `/auth` is in the organization's audit log as what it refuses on
 * `/api` is: a job credential's token held to its reach on Keycloak's Account API, userinfo and
 * admin API (not only at the token endpoint), and a token grant whose body the gateway does not
 * read (too large, a Content-Encoding it does not decode), naming no field of it. The test
 * gateway (both listeners) and the real Keycloak.
 */
describe('audit log: refusals on /auth', () => {
  let org: string;
  let user: TestUser;

  beforeAll(async () => {
    org = await createOrganization(['ws1', 'ws2']);
    user = await createUser(org, { workspaceRoles: ['ws1', 'ws2'] });
  });

  afterAll(async () => {
    await closeTestDb();
  });

  const auth = (base = testEnv().publicUrl) => `${base}/auth`;

  /** The records of the request `requestId` answered, once one is written. */
  async function recordsOfRequest(requestId: string | null): Promise<AuditRecord[]> {
    expect(requestId).not.toBeNull();
    let found: AuditRecord[] = [];
    await expect
      .poll(async () => {
        const rows = await testDb()<AuditRow>('audit_log')
          .where({ request_id: requestId })
          .orderBy('seq');
        found = rows.map(recordOf);
        return found.length;
      }, EVENTUALLY)
      .toBeGreaterThan(0);
    return found;
  }

  /** A job credential's access token, issued with `extra` fields. */
  async function jobToken(extra: string): Promise<string> {
    const res = await postToken(auth(), org, passwordGrantBody(user, extra));
    expect(res.status).toBe(200);
    return String(res.json.access_token);
  }

  async function call(url: string, token: string, method = 'GET') {
    const res = await fetch(url, { method, headers: { authorization: `Bearer ${token}` } });
    await res.arrayBuffer();
    return { status: res.status, requestId: res.headers.get('x-request-id') };
  }

  it("records a job credential's token refused by its reach on the Account API, userinfo and admin API", async () => {
    const narrowed = await jobToken('&realmgate_name=ws1-job&realmgate_workspaces=ws1');
    const readOnly = await jobToken('&realmgate_name=reader-job&realmgate_read_only=true');
    const calls: Array<[string, string, string, string, number]> = [
      ['GET', `${auth()}/realms/${org}/account/`, narrowed, 'out_of_reach', 403],
      [
        'GET',
        `${auth()}/realms/${org}/protocol/openid-connect/userinfo`,
        narrowed,
        'out_of_reach',
        403,
      ],
      [
        'GET',
        `${auth(testEnv().adminUrl)}/admin/realms/${org}/users`,
        narrowed,
        'out_of_reach',
        403,
      ],
      ['DELETE', `${auth()}/realms/${org}/account/sessions`, readOnly, 'read_only', 403],
    ];
    for (const [method, url, token, reason, status] of calls) {
      const res = await call(url, token, method);
      expect(res.status, `${method} ${url}`).toBe(status);
      const records = await recordsOfRequest(res.requestId);
      expect(records, `${method} ${url}`).toEqual([
        expect.objectContaining({
          org,
          action: 'auth.request',
          outcome: 'failure',
          credential: 'bearer',
          jobCredential: token === narrowed ? 'ws1-job' : 'reader-job',
          method,
          path: new URL(url).pathname,
          status,
          reason,
          address: '127.0.0.1',
        }),
      ]);
      const stored = JSON.stringify(records);
      expect(stored).not.toContain(token);
      expect(stored).not.toContain(String(claimsOf(token).jti));
    }
  });

  it('records a job credential refused past its lifetime on the Account API as expired', async () => {
    const token = await jobToken('&realmgate_name=late-job&realmgate_expires_in=60');
    await testDb()
      .table('refresh_token_details')
      .where({ session_id: String(claimsOf(token).sid) })
      .update({ expires_at: new Date(Date.now() - 1000) });
    const res = await call(`${auth()}/realms/${org}/account/`, token);
    expect(res.status).toBe(401);
    expect(await recordsOfRequest(res.requestId)).toEqual([
      expect.objectContaining({
        org,
        action: 'auth.request',
        jobCredential: 'late-job',
        status: 401,
        reason: 'expired',
      }),
    ]);
  });

  it("records a job credential refused on another organization's path in its own organization's log", async () => {
    const other = await createOrganization(['ws1']);
    const narrowed = await jobToken('&realmgate_name=roaming-job&realmgate_workspaces=ws1');
    for (const url of [
      `${auth(testEnv().adminUrl)}/admin/realms/${other}/users`,
      `${auth()}/realms/${other}/account/`,
    ]) {
      const res = await call(url, narrowed);
      expect(res.status, url).toBe(403);
      expect(await recordsOfRequest(res.requestId), url).toEqual([
        expect.objectContaining({
          org,
          action: 'auth.request',
          jobCredential: 'roaming-job',
          path: new URL(url).pathname,
          reason: 'out_of_reach',
          details: {},
        }),
      ]);
    }
  });

  it('leaves a token no realm signed to Keycloak: the reach step neither refuses nor files it', async () => {
    const other = await createOrganization(['ws1']);
    const genuine = await jobToken('&realmgate_name=framed-job&realmgate_read_only=true');
    // What anyone who learnt the session's id (a log, a logout token, an event) can write: its
    // realm's key id is public, the signature is not the realm's.
    const [header] = genuine.split('.');
    const { sid, iss } = claimsOf(genuine);
    const claims = { typ: 'Bearer', sid, iss, sub: 'framed', exp: 4102444800, iat: 1 };
    const payload = Buffer.from(JSON.stringify(claims)).toString('base64url');
    const forged = `${header}.${payload}.${randomBytes(256).toString('base64url')}`;
    for (const realm of [other, org]) {
      const res = await call(`${auth()}/realms/${realm}/account/sessions`, forged, 'DELETE');
      // Keycloak's refusal of a token that is not its own: nothing was done.
      expect(res.status, realm).toBeGreaterThanOrEqual(400);
      expect(res.status, realm).not.toBe(403);
      // A request refused after it, by the same gateway: once its record is written, any record
      // of the forged one would be (one writer, in order).
      const later = await call(`${auth()}/realms/${org}/account/sessions`, genuine, 'DELETE');
      expect(later.status).toBe(403);
      await recordsOfRequest(later.requestId);
      const filed = await testDb()('audit_log').where({ request_id: res.requestId });
      expect(filed, realm).toEqual([]);
    }
  });

  it("records a header of made-up tokens as malformed, in master's log for a realm that is no organization", async () => {
    const forged = (sid: string) => madeUpToken({ typ: 'Bearer', sid });
    const many = Array.from({ length: 5 }, (_, i) => forged(`s-${i}`)).join(', ');
    const ghost = `ghost${randomBytes(3).toString('hex')}`;
    for (const [realm, log, details] of [
      [org, org, {}],
      [ghost, 'master', { realm: ghost }],
    ] as const) {
      const res = await call(`${auth()}/realms/${realm}/account/`, many);
      expect(res.status).toBe(400);
      expect(await recordsOfRequest(res.requestId)).toEqual([
        expect.objectContaining({
          org: log,
          action: 'auth.request',
          jobCredential: null,
          status: 400,
          reason: 'malformed',
          details,
        }),
      ]);
    }
  });

  it("records a refusal at the token endpoint once, as the grant's", async () => {
    const narrowed = await jobToken('&realmgate_name=grant-job&realmgate_workspaces=ws2');
    const res = await postToken(auth(), org, passwordGrantBody(user), {
      authorization: `Bearer ${narrowed}`,
    });
    expect(res.status).toBe(403);
    const requestId = res.headers.get('x-request-id');
    // A request refused after it, by the same gateway: once its record is written, every
    // record of the grant is (one writer, in order).
    const later = await call(`${auth()}/realms/${org}/account/`, narrowed);
    await recordsOfRequest(later.requestId);
    expect(await recordsOfRequest(requestId)).toEqual([
      expect.objectContaining({ action: 'token.grant', outcome: 'failure', status: 403 }),
    ]);
  });

  it('records a token grant refused for its size or its Content-Encoding, naming none of its fields', async () => {
    const password = randomBytes(12).toString('base64url');
    const form = passwordGrantBody({ ...user, password });
    const url = `${auth()}/realms/${org}/protocol/openid-connect/token`;
    const huge = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `${form}&pad=${'a'.repeat(100_000)}`,
    });
    expect(huge.status).toBe(413);
    const compressed = await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'content-encoding': 'compress',
      },
      body: form,
    });
    expect(compressed.status).toBe(400);
    for (const [res, status, reason] of [
      [huge, 413, 'status_413'],
      [compressed, 400, 'invalid_request'],
    ] as const) {
      await res.arrayBuffer();
      const records = await recordsOfRequest(res.headers.get('x-request-id'));
      expect(records).toEqual([
        expect.objectContaining({
          org,
          action: 'token.grant',
          outcome: 'failure',
          actorName: null,
          clientId: null,
          status,
          reason,
          details: {},
        }),
      ]);
      const stored = JSON.stringify(records);
      expect(stored).not.toContain(password);
      expect(stored).not.toContain(user.username);
    }
  });
});
