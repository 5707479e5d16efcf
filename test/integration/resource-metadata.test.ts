import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTokenLifetimes } from '../../src/platform/realm-admin/token-lifetimes.ts';
import { basicAuth, callApi } from '../helpers/api.ts';
import { dpopKey, dpopProof } from '../helpers/dpop.ts';
import {
  claimsOf,
  createUser,
  keycloakAdmin,
  passwordGrantBody,
  postToken,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization, testDb } from '../helpers/platform.ts';
import { testEnv } from '../helpers/test-env.ts';

// RFC 9728 against the real Keycloak: what the gateway publishes of each resource, and where its
// 401 challenges point.

const metadataPath = (resource: string) => `/.well-known/oauth-protected-resource${resource}`;

async function metadata(resource: string) {
  const res = await fetch(`${testEnv().publicUrl}${metadataPath(resource)}`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('protected-resource metadata, from the real realms', () => {
  let open: string;
  let required: string;
  beforeAll(async () => {
    [open, required] = await Promise.all([
      createOrganization(['ws1']),
      createOrganization(['ws1']),
    ]);
    await setTokenLifetimes(await keycloakAdmin(), required, { dpop_bound_access_tokens: true });
  });
  afterAll(closeTestDb);

  it("names each organization's resource, its realm, and its DPoP switch as Keycloak has it", async () => {
    const { publicUrl } = testEnv();
    expect(await metadata(`/api/${open}`)).toEqual({
      status: 200,
      body: {
        resource: `${publicUrl}/api/${open}`,
        authorization_servers: [`${publicUrl}/auth/realms/${open}`],
        dpop_signing_alg_values_supported: expect.arrayContaining(['ES256', 'EdDSA']) as string[],
        dpop_bound_access_tokens_required: false,
        bearer_methods_supported: ['header'],
      },
    });
    expect((await metadata(`/api/${required}`)).body).toMatchObject({
      dpop_bound_access_tokens_required: true,
    });
    // The realm named as authorization server is the one whose discovery the client reads.
    const issuer = (await metadata(`/api/${open}`)).body.authorization_servers as string[];
    const discovery = await fetch(`${issuer[0]}/.well-known/openid-configuration`);
    expect(((await discovery.json()) as { issuer: string }).issuer).toBe(issuer[0]);
  });

  it('describes the platform API and the root with realm master', async () => {
    const { publicUrl } = testEnv();
    expect((await metadata('/api/platform')).body).toMatchObject({
      resource: `${publicUrl}/api/platform`,
      authorization_servers: [`${publicUrl}/auth/realms/master`],
    });
    expect((await metadata('')).body).toMatchObject({ resource: publicUrl });
  });

  it('answers an unknown organization 404 and a disabled one 403, as their API does', async () => {
    expect(await metadata('/api/org-nowhere')).toMatchObject({
      status: 404,
      body: { result: '404-00001' },
    });
    const disabled = await createOrganization([]);
    await testDb()('organizations').where({ id: disabled }).update({ enabled: false });
    expect(await metadata(`/api/${disabled}`)).toMatchObject({
      status: 403,
      body: { result: '403-23001' },
    });
  });

  it('answers an organization whose realm was deleted in Keycloak 404, as its other calls do', async () => {
    const orphan = await createOrganization([]);
    await (await keycloakAdmin()).realms.del({ realm: orphan });
    // Not 503: nothing will change by retrying, and a cache must not be told to come back.
    expect(await metadata(`/api/${orphan}`)).toMatchObject({
      status: 404,
      body: { result: '404-00001', data: null },
    });
  });

  it("points every 401 challenge at the realm's metadata", async () => {
    const { publicUrl } = testEnv();
    const missing = await callApi(`/api/${open}/platform/workspaces`, undefined);
    expect(missing.status).toBe(401);
    const challenge = missing.headers.get('www-authenticate') ?? '';
    const url = `${publicUrl}${metadataPath(`/api/${open}`)}`;
    expect(challenge).toContain(`Bearer realm="${open}", resource_metadata="${url}"`);
    expect(challenge).toContain(`resource_metadata="${url}", Basic`);
    const platform = await callApi('/api/platform/organizations', 'Bearer not-a-token');
    expect(platform.headers.get('www-authenticate')).toContain(
      `resource_metadata="${publicUrl}${metadataPath('/api/platform')}"`,
    );
  });

  it("names the realm's metadata in a refused Basic login's challenge too", async () => {
    const { publicUrl } = testEnv();
    const user = await createUser(open, { workspaceRoles: ['ws1'] });
    const refused = await callApi(
      `/api/${open}/platform/workspaces`,
      basicAuth({ username: user.username, password: `${user.password}-wrong` }),
    );
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toBe(
      `Basic realm="${open}", charset="UTF-8", ` +
        `resource_metadata="${publicUrl}${metadataPath(`/api/${open}`)}"`,
    );
  });

  it("names it when a job credential past its lifetime is refused, in its scheme's challenge", async () => {
    const { publicUrl } = testEnv();
    const user = await createUser(open, { workspaceRoles: ['ws1'] });
    const key = await dpopKey();
    const tokenUrl = `${publicUrl}/auth/realms/${open}/protocol/openid-connect/token`;
    const body = passwordGrantBody(user, '&realmgate_expires_in=60');
    const [bound, bearer] = await Promise.all([
      dpopProof(key, { method: 'POST', url: tokenUrl }).then((dpop) =>
        postToken(`${publicUrl}/auth`, open, body, { dpop }),
      ),
      postToken(`${publicUrl}/auth`, open, body),
    ]);
    expect([bound.status, bearer.status]).toEqual([200, 200]);
    const boundToken = String(bound.json.access_token);
    const bearerToken = String(bearer.json.access_token);
    // Both lifetimes over, as far as the record says (no call read it before).
    await testDb()
      .table('refresh_token_details')
      .whereIn('session_id', [String(claimsOf(boundToken).sid), String(claimsOf(bearerToken).sid)])
      .update({ expires_at: new Date(Date.now() - 1000) });
    const path = `/api/${open}/platform/workspaces`;
    const metadataUrl = `resource_metadata="${publicUrl}${metadataPath(`/api/${open}`)}"`;

    const proof = await dpopProof(key, {
      method: 'GET',
      url: `${publicUrl}${path}`,
      accessToken: boundToken,
    });
    const dpopRefused = await callApi(path, `DPoP ${boundToken}`, { headers: { dpop: proof } });
    expect(dpopRefused.status).toBe(401);
    expect(dpopRefused.body.message).toBe('The refresh token of this session has expired.');
    const dpopChallenge = dpopRefused.headers.get('www-authenticate') ?? '';
    expect(dpopChallenge).toMatch(new RegExp(`^DPoP realm="${open}", algs="[A-Za-z0-9 ]+", `));
    expect(dpopChallenge).toContain(`${metadataUrl}, error="invalid_token"`);

    const bearerRefused = await callApi(path, `Bearer ${bearerToken}`);
    expect(bearerRefused.status).toBe(401);
    expect(bearerRefused.headers.get('www-authenticate')).toContain(
      `Bearer realm="${open}", ${metadataUrl}, error="invalid_token"`,
    );
  });
});
