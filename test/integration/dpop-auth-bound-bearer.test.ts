import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  claimsOf,
  createUser,
  grantRealmManagementRole,
  passwordGrantBody,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { dpopKey, dpopProof, postForm, type DpopKey } from '../helpers/dpop.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * A DPoP-bound access token (`cnf.jkt`) on `/auth`: Keycloak's Account API, its userinfo and
 * its admin API. The gateway passes it on as it came (token-reach-guard.ts reads its reach
 * only), trusting Keycloak to hold it to its key (token-bindings.ts): this shows that Keycloak
 * does. Sent as `Bearer`, possession alone is no proof: refused, as `/api` refuses it (RFC 9449
 * 7.2). Sent as `DPoP`, its proof is checked: none or another key's refused, its own served.
 * The test gateway and the real Keycloak.
 */
describe('a DPoP-bound token on /auth', () => {
  const { publicUrl, adminUrl } = testEnv();
  let org: string;
  let member: TestUser;
  let key: DpopKey;
  let bound: string;

  /** The public (or admin) address of each `/auth` resource a bound token may be sent to. */
  const resources = () => [
    { name: 'Account API', base: publicUrl, path: `/auth/realms/${org}/account/` },
    {
      name: 'userinfo',
      base: publicUrl,
      path: `/auth/realms/${org}/protocol/openid-connect/userinfo`,
    },
    { name: 'admin API', base: adminUrl, path: `/auth/admin/realms/${org}/users?max=1` },
  ];

  async function call(base: string, path: string, headers: Record<string, string>) {
    const res = await fetch(`${base}${path}`, {
      headers: { accept: 'application/json', ...headers },
    });
    const text = await res.text();
    return {
      status: res.status,
      text,
      wwwAuthenticate: res.headers.get('www-authenticate'),
    };
  }

  /**
   * A proof of `proofKey` for a GET of `path`, with the token's `ath`: for the public address,
   * which Keycloak is told on either listener.
   */
  const proofFor = (proofKey: DpopKey, path: string) =>
    dpopProof(proofKey, { method: 'GET', url: `${publicUrl}${path}`, accessToken: bound });

  beforeAll(async () => {
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
    await grantRealmManagementRole(member, 'view-users');
    key = await dpopKey();
    const tokenUrl = `${publicUrl}/auth/realms/${org}/protocol/openid-connect/token`;
    const grant = await postForm(publicUrl, tokenUrl, passwordGrantBody(member), key);
    expect(grant.status).toBe(200);
    bound = String(grant.json.access_token);
    expect(claimsOf(bound).cnf).toMatchObject({ jkt: key.thumbprint });
  });

  afterAll(async () => {
    await closeTestDb();
  });

  it('sent as Bearer, with or without a proof of its key: Keycloak refuses it on every one', async () => {
    for (const { name, base, path } of resources()) {
      const combos = {
        Bearer: { authorization: `Bearer ${bound}` },
        bearer: { authorization: `bearer ${bound}` },
        'Bearer with a proof': {
          authorization: `Bearer ${bound}`,
          dpop: await proofFor(key, path),
        },
      };
      for (const [combo, headers] of Object.entries(combos)) {
        expect((await call(base, path, headers)).status, `${name}: ${combo}`).toBe(401);
      }
    }
  });

  it("sent as DPoP: Keycloak refuses no proof and another key's, and serves its own key's", async () => {
    const otherKey = await dpopKey();
    for (const { name, base, path } of resources()) {
      const none = await call(base, path, { authorization: `DPoP ${bound}` });
      expect(none.status, `${name}: no proof`).toBe(401);
      const wrong = await call(base, path, {
        authorization: `DPoP ${bound}`,
        dpop: await proofFor(otherKey, path),
      });
      expect(wrong.status, `${name}: another key`).toBe(401);
      const proved = await call(base, path, {
        authorization: `DPoP ${bound}`,
        dpop: await proofFor(key, path),
      });
      expect(proved.status, `${name}: its key`).toBe(200);
    }
  });
});
