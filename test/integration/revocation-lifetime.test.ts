import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  claimsOf,
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';
import { apiClientIdOf } from '../../src/tenancy/identifiers.ts';

/**
 * A revoked token stays refused until its own expiry, even when the administrator has shortened
 * the access-token lifetime since it was issued: the refusal's length is not read from today's
 * lifetime alone. No re-check (REVOCATION_CHECK_SECONDS=off), so only the revocation list can
 * refuse it; the replica's clock is moved past the new lifetime. Port 19960.
 */
describe('a revocation outlives a shortened access-token lifetime', () => {
  const clock = aheadClock();
  let replica: Replica;
  beforeAll(async () => {
    replica = await startReplica(19960, { REVOCATION_CHECK_SECONDS: 'off' }, undefined, clock);
  });
  afterAll(async () => {
    await replica.gateway.close();
    await closeTestDb();
  });

  async function status(path: string, token: string): Promise<number> {
    const res = await fetch(`${replica.url}${path}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    return res.status;
  }

  it('refuses a token issued under the longer lifetime after the new, shorter one has passed', async () => {
    const org = await createOrganization(['ws']);
    const user = await createUser(org);
    const grant = await postToken(`${testEnv().publicUrl}/auth`, org, passwordGrantBody(user));
    expect(grant.status).toBe(200);
    const token = String(grant.json.access_token);
    const claims = claimsOf(token);
    // Issued under the API client's lifetime of a day.
    expect(Number(claims.exp) - Number(claims.iat)).toBe(86400);
    const list = `/api/${org}/platform/workspaces`;
    expect(await status(list, token)).toBe(200);

    // The administrator shortens the API client's access-token lifetime to a minute.
    const admin = await keycloakAdmin();
    const [client] = await admin.clients.find({ realm: org, clientId: apiClientIdOf(org) });
    await admin.clients.update(
      { realm: org, id: client!.id! },
      { ...client, attributes: { ...client!.attributes, 'access.token.lifespan': '60' } },
    );

    const revoked = await fetch(
      `${replica.url}/api/${org}/platform/users/_current/refresh_tokens`,
      {
        method: 'DELETE',
        headers: { authorization: `Bearer ${token}` },
      },
    );
    expect(revoked.status).toBe(200);
    expect(await status(list, token)).toBe(401);

    // Past the new lifetime (and the leeway), the token issued for a day is still refused.
    clock.advance(5 * 60 * 1000);
    expect(await status(list, token)).toBe(401);
    // And until its own expiry.
    clock.advance(20 * 3600 * 1000);
    expect(await status(list, token)).toBe(401);
  });
});
