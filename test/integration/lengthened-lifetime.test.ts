import { describe, expect, it } from 'vitest';
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
 * An administrator lengthens the realm's access-token lifetime, and right after (within the
 * minute the gateway used to remember the lifetime for) ends a role or a user: the refusal must
 * last as long as the tokens issued under the new lifetime, which the gateway has not seen yet.
 * No re-check (REVOCATION_CHECK_SECONDS=off), so only the revocation list can refuse them; the
 * replica's clock is moved past the former lifetime. Port 19966 (admin listener 19967).
 */
describe('a refusal outlives a lifetime lengthened just before it', () => {
  const { clock, replica } = replicasWithoutRecheck([19966]);
  const status = (realm: string, token: string) =>
    bearerStatus(replica(), `/api/${realm}/platform/workspaces`, token);

  /** An admin-API call through the replica's admin listener, as the console makes it. */
  async function adminCall(method: string, path: string, body?: unknown): Promise<number> {
    const res = await fetch(`${adminUrlOf(replica())}/auth/admin/realms/${path}`, {
      method,
      headers: {
        authorization: `Bearer ${await consoleToken(replica())}`,
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    await res.arrayBuffer();
    return res.status;
  }

  /** A realm role `user` holds, and a token of theirs issued for `seconds` (never shown yet). */
  async function holderToken(org: string, user: TestUser, seconds: number) {
    const admin = await keycloakAdmin();
    const name = uniqueId('reader-');
    await admin.roles.create({ realm: org, name });
    const role = await admin.roles.findOneByName({ realm: org, name });
    await admin.users.addRealmRoleMappings({
      realm: org,
      id: await userIdOf(user),
      roles: [{ id: role!.id!, name }],
    });
    const grant = await postToken(`${testEnv().publicUrl}/auth`, org, passwordGrantBody(user));
    expect(grant.status).toBe(200);
    const token = String(grant.json.access_token);
    const claims = claimsOf(token);
    expect(Number(claims.exp) - Number(claims.iat)).toBe(seconds);
    return { name, token };
  }

  /**
   * An organization whose longest access-token lifetime is the realm's 300 s (its API client's
   * 60 s), and a role ended there: the gateway has read that lifetime (the role's refusal
   * needed it) just now.
   */
  async function shortLivedOrganization(): Promise<string> {
    const org = await createOrganization(['ws']);
    await setLifetimeThroughGateway(replica(), org, 60);
    const { name } = await holderToken(org, await createUser(org), 60);
    expect(await adminCall('DELETE', `${org}/roles/${encodeURIComponent(name)}`)).toBe(204);
    return org;
  }

  it('a role deleted after the lifetime was lengthened through the gateway', async () => {
    const org = await shortLivedOrganization();
    await setLifetimeThroughGateway(replica(), org, 86400);
    const { name, token } = await holderToken(org, await createUser(org), 86400);
    expect(await adminCall('DELETE', `${org}/roles/${encodeURIComponent(name)}`)).toBe(204);
    expect(await status(org, token)).toBe(401);
    // Past the former lifetime and the longest a cached Basic login is kept (a role's refusal
    // lasts that long too): the token lives a day, its role is gone.
    clock.advance(2 * 3600 * 1000);
    expect(await status(org, token)).toBe(401);
  });

  it("a user disabled after the lifetime was lengthened in Keycloak's console", async () => {
    const org = await shortLivedOrganization();
    // Straight at Keycloak: the gateway sees nothing of the change.
    await setLifetimeAtKeycloak(org, 86400);
    const user = await createUser(org);
    const { token } = await holderToken(org, user, 86400);
    const userId = await userIdOf(user);
    expect(await adminCall('PUT', `${org}/users/${userId}`, { enabled: false })).toBe(204);
    expect(await status(org, token)).toBe(401);
    clock.advance(2 * 3600 * 1000);
    expect(await status(org, token)).toBe(401);
  });
});
