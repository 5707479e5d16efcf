import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { claimsOf, createUser, passwordGrantBody, postToken } from '../helpers/keycloak.ts';
import {
  adminUrlOf,
  bearerStatus,
  consoleToken,
  replicasWithoutRecheck,
  setLifetimeAtKeycloak,
  setLifetimeThroughGateway,
} from '../helpers/lifetime-suite.ts';
import { createOrganization } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * A revoked token stays refused until its own expiry, even when the administrator has shortened
 * the access-token lifetime since it was issued: the refusal's length is not read from today's
 * lifetime alone. No re-check (REVOCATION_CHECK_SECONDS=off), so only the revocation list can
 * refuse it; the replica's clock is moved past the new lifetime. Port 19960.
 */
describe('a revocation outlives a shortened access-token lifetime', () => {
  const { clock, replica } = replicasWithoutRecheck([19960]);
  const status = (path: string, token: string) => bearerStatus(replica(), path, token);

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
    await setLifetimeAtKeycloak(org, 60);

    const revoked = await fetch(
      `${replica().url}/api/${org}/platform/users/_current/refresh_tokens`,
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

/**
 * A realm's not-before set through the admin listener (the console's "Revocation"), naming a
 * moment after a token's issue but longer ago than the realm's access-token lifetime of today:
 * a token issued under the former, longer lifetime is still alive and must be refused. Replica
 * A takes the request; replica B, which served the token, shares A's Redis prefix. No re-check.
 * Ports 19962 (A) and 19964 (B).
 */
describe("a realm's not-before older than today's lifetime still ends a longer-lived token", () => {
  const prefix = `realmgate-notbefore:${randomBytes(4).toString('hex')}:`;
  const { clock, replica } = replicasWithoutRecheck([19962, 19964], () => ({
    REDIS_URL: testEnv().redisUrl,
    REDIS_KEY_PREFIX: prefix,
  }));
  const a = () => replica(0);
  const b = () => replica(1);

  it('refuses it on the replica that served it, past the shortened lifetime', async () => {
    const org = await createOrganization(['ws']);
    const user = await createUser(org);
    const grant = await postToken(`${testEnv().publicUrl}/auth`, org, passwordGrantBody(user));
    expect(grant.status).toBe(200);
    const token = String(grant.json.access_token);
    const issuedAt = Number(claimsOf(token).iat);
    const list = `/api/${org}/platform/workspaces`;
    const onB = () => bearerStatus(b(), list, token);
    expect(await onB()).toBe(200);

    // The administrator shortens the API client's access-token lifetime through the gateway's
    // API: the realm's longest is now its own 300 s.
    await setLifetimeThroughGateway(a(), org, 60);

    // Ten minutes on, the not-before is set to a second after the token's issue: older than
    // today's lifetime, so no token issued under it could be alive, but this one is.
    clock.advance(10 * 60 * 1000);
    const put = await fetch(`${adminUrlOf(a())}/auth/admin/realms/${org}`, {
      method: 'PUT',
      headers: {
        authorization: `Bearer ${await consoleToken(a())}`,
        'content-type': 'application/json',
      },
      body: JSON.stringify({ notBefore: issuedAt + 1 }),
    });
    expect(put.status).toBe(204);
    await expect.poll(onB, EVENTUALLY).toBe(401);
  });
});
