import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordOf, type AuditRow } from '../../src/audit/audit-rows.ts';
import type { AuditRecord } from '../../src/audit/audit-chain.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { requestFrom } from '../helpers/from-address.ts';
import { createUser, passwordGrantBody } from '../helpers/keycloak.ts';
import { startKeycloakFront, type KeycloakFront } from '../helpers/keycloak-front.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

const TOKEN = /\/protocol\/openid-connect\/token$/;

/**
 * A token grant through `/auth` whose client hung up before Keycloak's answer came: Keycloak
 * issued the tokens (a session of the user exists), but nobody got them. The audit log must not
 * say the grant succeeded. The real Keycloak behind a TCP front that holds the token endpoint's
 * answer until the client is gone. Port 19930 (and 19931).
 */
describe('audit log: a token grant whose client hung up', () => {
  let front: KeycloakFront;
  let replica: Replica;
  let org: string;

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    front = await startKeycloakFront(testEnv().keycloakUrl);
    replica = await startReplica(19930, {
      KEYCLOAK_URL: front.url,
      AUDIT_FLUSH_INTERVAL_MS: '100',
    });
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await front?.close();
    await closeTestDb();
  });

  async function grantRecordOf(username: string): Promise<AuditRecord> {
    let found: AuditRecord | undefined;
    await expect
      .poll(async () => {
        const rows = await testDb()<AuditRow>('audit_log')
          .where({ org, action: 'token.grant', actor_name: username })
          .orderBy('seq');
        found = rows.map(recordOf).at(-1);
        return found;
      }, EVENTUALLY)
      .toBeDefined();
    return found!;
  }

  it('records it as not delivered, never as a success', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const gate = front.gate(TOKEN);
    const hangUp = new AbortController();
    const sent = requestFrom(
      '127.0.0.1',
      `${replica.url}/auth/realms/${org}/protocol/openid-connect/token`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: passwordGrantBody(user),
        signal: hangUp.signal,
      },
    );
    // Keycloak has answered (the tokens exist); the client leaves before they reach it.
    await gate.reached;
    hangUp.abort();
    await expect(sent).rejects.toThrow();
    gate.open();
    const record = await grantRecordOf(user.username);
    expect(record).toMatchObject({
      action: 'token.grant',
      outcome: 'failure',
      reason: 'not_delivered',
      status: null,
      clientId: `_${org}-api`,
    });
  });

  it('still records a grant its client got as a success', async () => {
    const user = await createUser(org, { workspaceRoles: ['ws1'] });
    const res = await requestFrom(
      '127.0.0.1',
      `${replica.url}/auth/realms/${org}/protocol/openid-connect/token`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: passwordGrantBody(user),
      },
    );
    expect(res.status).toBe(200);
    expect(await grantRecordOf(user.username)).toMatchObject({
      outcome: 'success',
      reason: null,
      status: 200,
    });
  });
});
