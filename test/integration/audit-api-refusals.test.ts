import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../src/audit/audit-chain.ts';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import {
  claimsOf,
  createUser,
  passwordGrantBody,
  postToken,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * An `/api` refusal of a caller whose credentials were verified (its job credential's reach,
 * a write of a read-only one, a missing role) names who was refused, as an admitted call names
 * its caller; a refusal of the credentials themselves names only what the client sent. The test
 * gateway and the real Keycloak and PostgreSQL.
 */
describe('audit log: /api refusals name the verified caller', () => {
  let org: string;
  let user: TestUser;

  beforeAll(async () => {
    org = await createOrganization(['ws1', 'ws2', 'ws3']);
    user = await createUser(org, { workspaceRoles: ['ws1', 'ws2'] });
  });

  afterAll(async () => {
    await closeTestDb();
  });

  /** The record of the request `requestId` answered, once written. */
  async function recordOfRequest(requestId: string | null): Promise<AuditRecord> {
    expect(requestId).not.toBeNull();
    let found: AuditRecord | undefined;
    await expect
      .poll(async () => {
        const row = await testDb()<AuditRow>('audit_log').where({ request_id: requestId }).first();
        found = row && recordOf(row);
        return found;
      }, EVENTUALLY)
      .toBeDefined();
    return found!;
  }

  async function token(extra = ''): Promise<string> {
    const res = await postToken(`${testEnv().publicUrl}/auth`, org, passwordGrantBody(user, extra));
    expect(res.status).toBe(200);
    return String(res.json.access_token);
  }

  async function call(path: string, authorization: string, method = 'GET') {
    const res = await fetch(`${testEnv().publicUrl}${path}`, {
      method,
      headers: { authorization, 'content-type': 'application/json' },
      ...(method === 'GET' ? {} : { body: '{}' }),
    });
    await res.arrayBuffer();
    return { status: res.status, requestId: res.headers.get('x-request-id') };
  }

  const operations = (ws: string) => `/api/${org}/workspaces/${ws}/ita/menu/operation_list/filter/`;
  const jtiHash = (jwt: string) =>
    createHash('sha256')
      .update(String(claimsOf(jwt).jti))
      .digest('hex');

  it('names the job credential, its caller, client and token when its reach or read-only refuses it', async () => {
    const narrowed = await token('&realmgate_name=ws1-only&realmgate_workspaces=ws1');
    const reader = await token('&realmgate_name=reader&realmgate_read_only=true');
    const plain = await token();
    const cases: Array<[string, string, string, string | null, number, string]> = [
      [narrowed, 'GET', operations('ws2'), 'ws1-only', 403, 'out_of_reach'],
      [reader, 'POST', operations('ws1'), 'reader', 403, 'read_only'],
      [plain, 'GET', operations('ws3'), null, 403, 'missing_role'],
    ];
    for (const [jwt, method, path, jobCredential, status, reason] of cases) {
      const res = await call(path, `Bearer ${jwt}`, method);
      expect(res.status, reason).toBe(status);
      expect(await recordOfRequest(res.requestId), reason).toMatchObject({
        org,
        action: 'api.request',
        outcome: 'failure',
        actorRealm: org,
        actorId: String(claimsOf(jwt).sub),
        actorName: user.username,
        credential: 'bearer',
        clientId: `_${org}-api`,
        jobCredential,
        jtiSha256: jtiHash(jwt),
        status,
        reason,
      });
    }
  });

  it('names the job credential refused past its lifetime', async () => {
    const late = await token('&realmgate_name=late&realmgate_expires_in=60');
    await testDb()
      .table('refresh_token_details')
      .where({ session_id: String(claimsOf(late).sid) })
      .update({ expires_at: new Date(Date.now() - 1000) });
    const res = await call(operations('ws1'), `Bearer ${late}`);
    expect(res.status).toBe(401);
    expect(await recordOfRequest(res.requestId)).toMatchObject({
      actorName: user.username,
      jobCredential: 'late',
      jtiSha256: jtiHash(late),
      reason: 'expired',
    });
  });

  it('names no caller for credentials it refused, but the user name a Basic login tried', async () => {
    const wrong = await callApi(
      `/api/${org}/platform/workspaces`,
      basicAuth({ username: user.username, password: 'not-the-password' }),
    );
    expect(wrong.status).toBe(401);
    expect(await recordOfRequest(wrong.headers.get('x-request-id'))).toMatchObject({
      actorRealm: null,
      actorId: null,
      actorName: user.username,
      clientId: null,
      jobCredential: null,
      reason: 'wrong_password',
    });
    const forged = await call(operations('ws1'), 'Bearer not.a.token');
    expect(await recordOfRequest(forged.requestId)).toMatchObject({
      actorName: null,
      clientId: null,
      jobCredential: null,
      status: 401,
    });
  });
});
