import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, callApi } from '../helpers/api.ts';
import {
  claimsOf,
  createUser,
  createPublicClient,
  keycloakAdmin,
  passwordGrantBody,
  type TestUser,
} from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { dpopKey, dpopProof, postForm, type DpopKey } from '../helpers/dpop.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * `/auth` carries DPoP both ways unchanged (proofs to Keycloak on the password, refresh and
 * revocation requests; its challenges back; discovery), the throttle's 401 and job credentials
 * work with a proof, and the console switch "OAuth 2.0 DPoP Bound Access Tokens Enabled" on an
 * organization's API client: Basic and DPoP clients served, a Bearer-only client told why.
 */
describe('DPoP through /auth', () => {
  const publicUrl = testEnv().publicUrl;
  let replica: Replica;
  let org: string;
  let member: TestUser;
  let key: DpopKey;

  const realmUrl = () => `${publicUrl}/auth/realms/${org}`;
  const endpoint = (name: string) => `${realmUrl()}/protocol/openid-connect/${name}`;
  const platformPath = () => `/api/${org}/platform/workspaces`;

  /** POSTs a form to `name` through the replica, with a proof of `proofKey` when given. */
  const post = (name: string, body: string, proofKey?: DpopKey) =>
    postForm(replica.url, endpoint(name), body, proofKey);

  /** The API client's `dpop.bound.access.tokens`, as the console's switch sets it. */
  async function requireDpop(on: boolean): Promise<void> {
    const admin = await keycloakAdmin();
    const [client] = await admin.clients.find({ realm: org, clientId: `_${org}-api` });
    await admin.clients.update(
      { realm: org, id: client!.id! },
      { ...client, attributes: { ...client!.attributes, 'dpop.bound.access.tokens': String(on) } },
    );
  }

  const refreshBody = (token: unknown) =>
    `grant_type=refresh_token&client_id=_${org}-api&refresh_token=${String(token)}`;

  /** A DPoP call of `path` through the replica with a fresh proof of `proofKey`. */
  async function dpopCall(path: string, token: string, proofKey = key) {
    const proof = await dpopProof(proofKey, {
      method: 'GET',
      url: `${publicUrl}${path}`,
      accessToken: token,
    });
    return callApi(path, `DPoP ${token}`, { base: replica.url, headers: { dpop: proof } });
  }

  beforeAll(async () => {
    replica = await startReplica(19520, {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: testEnv().redisKeyPrefix,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
    });
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
    key = await dpopKey();
  });

  afterAll(async () => {
    // The switch is off again whatever a test left.
    if (org) await requireDpop(false);
    await replica?.gateway.close();
    await closeTestDb();
  });

  it("shows Keycloak's dpop_signing_alg_values_supported in discovery", async () => {
    const res = await fetch(`${replica.url}/auth/realms/${org}/.well-known/openid-configuration`);
    const document = (await res.json()) as Record<string, unknown>;
    expect(document.dpop_signing_alg_values_supported).toEqual(expect.arrayContaining(['ES256']));
  });

  it('refresh grant: a proof of the same key is needed; the new tokens stay bound', async () => {
    const first = await post('token', passwordGrantBody(member), key);
    expect(first.status).toBe(200);
    const refreshed = await post('token', refreshBody(first.json.refresh_token), key);
    expect(refreshed.status).toBe(200);
    expect(refreshed.json.token_type).toBe('DPoP');
    expect(claimsOf(refreshed.json.access_token).cnf).toMatchObject({ jkt: key.thumbprint });
    // A copied refresh token without its key: refused by Keycloak, the answer passed on as is.
    const copied = await post('token', refreshBody(refreshed.json.refresh_token));
    expect(copied.status).toBe(400);
    const otherKey = await post(
      'token',
      refreshBody(refreshed.json.refresh_token),
      await dpopKey(),
    );
    expect(otherKey.status).toBe(400);
  });

  it('revocation with a proof reaches Keycloak; the revoked session is refused at once', async () => {
    const grant = await post('token', passwordGrantBody(member), key);
    const access = String(grant.json.access_token);
    expect((await dpopCall(platformPath(), access)).status).toBe(200);
    const revoked = await post(
      'revoke',
      `client_id=_${org}-api&token=${String(grant.json.refresh_token)}&token_type_hint=refresh_token`,
      key,
    );
    expect(revoked.status).toBe(200);
    const after = await dpopCall(platformPath(), access);
    expect(after.status).toBe(401);
    expect(after.headers.get('www-authenticate')).toMatch(/^DPoP .*error="invalid_token"/);
  });

  it("passes Keycloak's DPoP challenge back from userinfo, and its answer with a proof", async () => {
    const grant = await post('token', passwordGrantBody(member), key);
    const access = String(grant.json.access_token);
    const userinfo = `${replica.url}/auth/realms/${org}/protocol/openid-connect/userinfo`;
    const bare = await fetch(userinfo, { headers: { authorization: `DPoP ${access}` } });
    expect(bare.status).toBe(401);
    expect(bare.headers.get('www-authenticate')).toMatch(/DPoP/);
    const proof = await dpopProof(key, {
      method: 'GET',
      url: endpoint('userinfo'),
      accessToken: access,
    });
    const proved = await fetch(userinfo, {
      headers: { authorization: `DPoP ${access}`, dpop: proof },
    });
    expect(proved.status).toBe(200);
  });

  it("re-checks a bound token with Keycloak's introspection like any (REVOCATION_CHECK_SECONDS=0)", async () => {
    const checking = await startReplica(19540, { REVOCATION_CHECK_SECONDS: '0' });
    try {
      const grant = await post('token', passwordGrantBody(member), key);
      const access = String(grant.json.access_token);
      const proof = await dpopProof(key, {
        method: 'GET',
        url: `${publicUrl}${platformPath()}`,
        accessToken: access,
      });
      const res = await callApi(platformPath(), `DPoP ${access}`, {
        base: checking.url,
        headers: { dpop: proof },
      });
      expect({ status: res.status, result: res.body.result }).toEqual({
        status: 200,
        result: '000-00000',
      });
    } finally {
      await checking.gateway.close();
    }
  });

  it('wrong credentials with a proof: the same 401 as without', async () => {
    const wrong = passwordGrantBody({ ...member, password: 'not-the-password' });
    const withProof = await post('token', wrong, key);
    const without = await post('token', wrong);
    expect(withProof.status).toBe(401);
    expect(without.status).toBe(401);
    expect(withProof.json.error).toBe(without.json.error);
  });

  it('job credentials with a proof: recorded and bound', async () => {
    const job = await post(
      'token',
      `${passwordGrantBody(member)}&realmgate_name=dpop-job&realmgate_workspaces=ws1&realmgate_read_only=true`,
      key,
    );
    expect(job.status).toBe(200);
    const access = String(job.json.access_token);
    expect(claimsOf(access).cnf).toMatchObject({ jkt: key.thumbprint });
    expect((await dpopCall(platformPath(), access)).status).toBe(200);
    const tokens = await callApi(
      `/api/${org}/platform/users/_current/refresh_tokens`,
      basicAuth(member),
      { base: replica.url },
    );
    expect(JSON.stringify(tokens.body.data)).toContain('dpop-job');
  });

  describe('with the console switch on (dpop.bound.access.tokens)', () => {
    let minted: string;
    let basicUser: TestUser;

    beforeAll(async () => {
      // A Bearer token minted before the switch, and a user whose Basic login is not cached.
      const before = await post('token', passwordGrantBody(member));
      minted = String(before.json.access_token);
      basicUser = await createUser(org, { workspaceRoles: ['ws1'] });
      await requireDpop(true);
    });

    afterAll(async () => {
      await requireDpop(false);
    });

    it('refuses a Bearer-only client at Keycloak, naming DPoP', async () => {
      const bearerOnly = await post('token', passwordGrantBody(member));
      expect(bearerOnly.status).toBe(400);
      expect(bearerOnly.json).toMatchObject({
        error: 'invalid_request',
        error_description: 'DPoP proof is missing',
      });
    });

    it('serves a DPoP client', async () => {
      const grant = await post('token', passwordGrantBody(member), key);
      expect(grant.status).toBe(200);
      expect((await dpopCall(platformPath(), String(grant.json.access_token))).status).toBe(200);
    });

    it("serves Basic: the gateway's own login carries a proof of its key", async () => {
      const res = await callApi(platformPath(), basicAuth(basicUser), { base: replica.url });
      expect({ status: res.status, result: res.body.result }).toEqual({
        status: 200,
        result: '000-00000',
      });
    });

    it('refuses an unbound Bearer token of any other client of the realm, saying DPoP is required', async () => {
      // A client a realm administrator added beside the API client, allowed direct grants: the
      // switch is the API client's, so Keycloak binds none of this client's tokens.
      await createPublicClient(org, 'job-runner');
      const signedIn = await post(
        'token',
        `grant_type=password&client_id=job-runner&username=${encodeURIComponent(member.username)}` +
          `&password=${encodeURIComponent(member.password)}`,
      );
      expect(signedIn.status).toBe(200);
      const res = await callApi(platformPath(), `Bearer ${String(signedIn.json.access_token)}`, {
        base: replica.url,
      });
      expect({ status: res.status, result: res.body.result }).toEqual({
        status: 401,
        result: '401-00002',
      });
      expect(res.body.message).toMatch(/requires DPoP/);
      expect(res.headers.get('www-authenticate')).toMatch(
        new RegExp(
          `^DPoP realm="${org}", algs="[^"]+", resource_metadata="${publicUrl}/\\.well-known/oauth-protected-resource/api/${org}", error="invalid_token", error_description="[^"]*requires DPoP`,
        ),
      );
    });

    it('a Bearer token minted before the switch: still served until it expires', async () => {
      const res = await callApi(platformPath(), `Bearer ${minted}`, { base: replica.url });
      expect(res.status).toBe(200);
    });
  });
});
