import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../src/audit/audit-chain.ts';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { createUser, passwordGrantBody, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * What the gateway refuses on `/auth` is in the organization's audit log: a token grant whose
 * body the gateway does not read (too large, a Content-Encoding it does not decode), naming no
 * field of it. The test gateway and the real Keycloak.
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
