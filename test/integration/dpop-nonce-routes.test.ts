import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dpopKey, dpopProof, type DpopKey } from '../helpers/dpop.ts';
import { createUser, passwordGrantBody, postToken, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

// DPOP_NONCE on every kind of route that takes a proof at the gateway: the one admission's DPoP
// step asks for the nonce on an organization's routes, the refresh-token listing and revocation,
// the platform's routes (realm master) and the forwarded route, whose upstream never sees a
// request refused for it. The token endpoint under /auth is Keycloak's: its proofs are checked
// there, without the gateway's nonce (docs/security-model.md, "Server nonces").

describe('server nonces (DPOP_NONCE) on every route kind', () => {
  const { publicUrl } = testEnv();
  let replica: Replica;
  let upstream: RecordingUpstream;
  let org: string;
  const key: { org?: DpopKey; platform?: DpopKey } = {};
  const access: { org?: string; platform?: string } = {};

  /** A bound access token of `user`, granted through the replica's `/auth` with `proofKey`. */
  async function boundToken(user: TestUser, proofKey: DpopKey) {
    const url = `${publicUrl}/auth/realms/${user.realm}/protocol/openid-connect/token`;
    const grant = await postToken(`${replica.url}/auth`, user.realm, passwordGrantBody(user), {
      dpop: await dpopProof(proofKey, { method: 'POST', url }),
    });
    // Keycloak's token endpoint takes a proof without the gateway's nonce, and the gateway
    // adds none to its answer.
    expect(grant.status, JSON.stringify(grant.json)).toBe(200);
    expect(grant.headers.get('dpop-nonce')).toBeNull();
    return String(grant.json.access_token);
  }

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    replica = await startReplica(19656, {
      DPOP_NONCE: 'true',
      // The nonces' key: the gateway's own secret, which nonces require (config.ts).
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
      AUTOMATION_UPSTREAM_URL: upstream.url,
    });
    org = await createOrganization(['ws1']);
    const [member, administrator] = await Promise.all([
      createUser(org, { workspaceRoles: ['ws1'] }),
      createUser('master'),
    ]);
    [key.org, key.platform] = await Promise.all([dpopKey(), dpopKey()]);
    [access.org, access.platform] = await Promise.all([
      boundToken(member, key.org),
      boundToken(administrator, key.platform),
    ]);
  });
  afterAll(async () => {
    await replica?.gateway.close();
    await upstream?.close();
    await closeTestDb();
  });

  /** `method path` with a bound token and a fresh proof, carrying `nonce` when given. */
  async function call(who: 'org' | 'platform', method: string, path: string, nonce?: string) {
    const proof = await dpopProof(key[who]!, {
      method,
      url: `${publicUrl}${path}`,
      accessToken: access[who]!,
      claims: { nonce },
    });
    const res = await fetch(`${replica.url}${path}`, {
      method,
      headers: { authorization: `DPoP ${access[who]!}`, dpop: proof },
    });
    return { status: res.status, headers: res.headers, text: await res.text() };
  }

  const routes: Array<[string, 'org' | 'platform', string, () => string]> = [
    ['an organization route', 'org', 'GET', () => `/api/${org}/platform/workspaces`],
    [
      'the refresh-token listing',
      'org',
      'GET',
      () => `/api/${org}/platform/users/_current/refresh_tokens`,
    ],
    [
      'a refresh-token revocation',
      'org',
      'DELETE',
      () =>
        `/api/${org}/platform/users/_current/refresh_tokens/00000000-0000-4000-8000-000000000000`,
    ],
    ['a platform route (realm master)', 'platform', 'GET', () => '/api/platform/organizations'],
    [
      'the forwarded route',
      'org',
      'GET',
      () => `/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/`,
    ],
  ];

  it.each(routes)(
    'asks for the nonce on %s, and takes the proof that carries it',
    async (_kind, who, method, pathOf) => {
      const path = pathOf();
      upstream.seen.length = 0;
      const asked = await call(who, method, path);
      expect(asked.status, asked.text).toBe(401);
      expect(asked.headers.get('www-authenticate')).toContain('error="use_dpop_nonce"');
      const nonce = asked.headers.get('dpop-nonce');
      expect(nonce).toMatch(/^[A-Za-z0-9_-]{22}$/);
      // Refused before anything is forwarded.
      expect(upstream.seen).toHaveLength(0);

      const served = await call(who, method, path, nonce!);
      // Past the credentials: whatever the route answers then, not a refusal of the proof.
      expect(served.status, served.text).not.toBe(401);
      expect(served.headers.get('dpop-nonce')).toBeNull();
    },
  );
});
