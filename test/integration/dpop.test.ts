import { randomBytes } from 'node:crypto';
import { exportJWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessTokenOf, type ApiResponse } from '../helpers/api.ts';
import { claimsOf, createUser, passwordGrantBody, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { dpopKey, dpopProof, rawJws, type DpopKey, type ProofOptions } from '../helpers/dpop.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/recording-upstream.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * DPoP (RFC 9449) end to end against the real Keycloak: bound tokens issued through `/auth`
 * with a proof, served on `/api` with the DPoP scheme on both route kinds, every bad proof
 * refused with its challenge, a proof used once across two replicas sharing Redis, and the
 * upstream never seeing a proof.
 */

const nowSeconds = () => Math.floor(Date.now() / 1000);
const fromBase64Lines = (value: unknown) =>
  Buffer.from(String(value), 'base64').toString('utf8').split('\n');

/** What a DPoP client's token request through `/auth` answers. */
interface TokenAnswer {
  status: number;
  json: Record<string, unknown>;
  headers: Headers;
}

describe('DPoP', () => {
  const shared = {
    REDIS_URL: testEnv().redisUrl,
    REDIS_KEY_PREFIX: testEnv().redisKeyPrefix,
    REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
  };
  const publicUrl = testEnv().publicUrl;
  let upstream: RecordingUpstream;
  let replicaA: Replica;
  let replicaB: Replica;
  let org: string;
  let member: TestUser;
  let key: DpopKey;
  let bound: { access: string; refresh: string };

  const tokenUrl = (realm: string) =>
    `${publicUrl}/auth/realms/${realm}/protocol/openid-connect/token`;
  const forwardedPath = () => `/api/${org}/workspaces/ws1/ita/menu/operation_list/filter/`;
  const platformPath = () => `/api/${org}/platform/workspaces`;

  /** A token request through replica A's `/auth`, with a proof of `proofKey` when given. */
  async function tokenRequest(body: string, proofKey?: DpopKey): Promise<TokenAnswer> {
    const url = tokenUrl(org);
    const headers: Record<string, string> = {
      'content-type': 'application/x-www-form-urlencoded',
    };
    if (proofKey) headers.dpop = await dpopProof(proofKey, { method: 'POST', url });
    const res = await fetch(`${replicaA.url}${new URL(url).pathname}`, {
      method: 'POST',
      headers,
      body,
    });
    return {
      status: res.status,
      json: (await res.json()) as Record<string, unknown>,
      headers: res.headers,
    };
  }

  /** Calls `path` on `replica` with `Authorization: <scheme> <token>` and these DPoP headers. */
  async function call(
    replica: Replica,
    path: string,
    authorization: string,
    proofs: string[],
    method = 'GET',
  ): Promise<ApiResponse> {
    const headers = new Headers({ authorization });
    for (const proof of proofs) headers.append('dpop', proof);
    const res = await fetch(`${replica.url}${path}`, { method, headers });
    return {
      status: res.status,
      body: (await res.json()) as ApiResponse['body'],
      headers: res.headers,
    };
  }

  /** A fresh proof of `key` for `method` on the URL the client addresses (`PUBLIC_URL` + path). */
  const proofFor = (path: string, options: Partial<ProofOptions> = {}, signer = key) =>
    dpopProof(signer, {
      method: 'GET',
      url: `${publicUrl}${path}`,
      accessToken: bound.access,
      ...options,
    });

  /** A 401 in the envelope with a DPoP challenge of `error`, the message matching `message`. */
  function expectDpopRefusal(
    res: { status: number; body: ApiResponse['body']; challenge: string },
    error: 'invalid_dpop_proof' | 'invalid_token',
    message: RegExp,
  ): void {
    expect({ status: res.status, result: res.body.result, data: res.body.data }).toEqual({
      status: 401,
      result: '401-00002',
      data: null,
    });
    expect(res.body.message).toMatch(message);
    expect(res.challenge).toMatch(new RegExp(`^DPoP realm="${org}", algs="[^"]*ES256[^"]*"`));
    expect(res.challenge).toContain(`error="${error}"`);
    expect(res.challenge).not.toContain(bound.access.split('.')[2]!);
  }

  const refusalOf = (res: ApiResponse) => ({
    ...res,
    challenge: res.headers.get('www-authenticate') ?? '',
  });

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    const settings = { ...shared, AUTOMATION_UPSTREAM_URL: upstream.url };
    [replicaA, replicaB] = await Promise.all([
      startReplica(19500, settings),
      startReplica(19510, settings),
    ]);
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
    key = await dpopKey();
    const answer = await tokenRequest(passwordGrantBody(member), key);
    expect(answer.status).toBe(200);
    bound = {
      access: String(answer.json.access_token),
      refresh: String(answer.json.refresh_token),
    };
  });

  afterAll(async () => {
    await replicaA?.gateway.close();
    await replicaB?.gateway.close();
    await upstream?.close();
    await closeTestDb();
  });

  it('gets a token bound to the key through /auth with a proof (Keycloak binds it: cnf.jkt)', async () => {
    const answer = await tokenRequest(passwordGrantBody(member), key);
    expect(answer.status).toBe(200);
    expect(answer.json.token_type).toBe('DPoP');
    const claims = claimsOf(answer.json.access_token);
    // Keycloak 26.7 names a bound access token `typ` DPoP, with `cnf.kc-jkt-type` beside jkt.
    expect(claims.cnf).toEqual({ jkt: key.thumbprint, 'kc-jkt-type': 'DPoP' });
    expect(claims.typ).toBe('DPoP');
    // A public client's refresh token is bound too.
    expect(claimsOf(answer.json.refresh_token).cnf).toMatchObject({ jkt: key.thumbprint });
  });

  it('serves the DPoP scheme with a fresh proof on a platform route', async () => {
    const res = await call(replicaA, platformPath(), `DPoP ${bound.access}`, [
      await proofFor(platformPath()),
    ]);
    expect({ status: res.status, result: res.body.result }).toEqual({
      status: 200,
      result: '000-00000',
    });
    // The scheme's name is case-insensitive (RFC 9110 11.1).
    const lower = await call(replicaB, platformPath(), `dpop ${bound.access}`, [
      await proofFor(platformPath()),
    ]);
    expect(lower.status).toBe(200);
  });

  it('forwards with the same identity headers as Bearer, never the proof or the token', async () => {
    upstream.seen.length = 0;
    const res = await call(
      replicaA,
      forwardedPath(),
      `DPoP ${bound.access}`,
      [await proofFor(forwardedPath(), { method: 'POST' })],
      'POST',
    );
    expect(res.status).toBe(200);
    expect(upstream.seen).toHaveLength(1);
    const seen = upstream.seen[0]!;
    expect(seen.url).toBe(forwardedPath());
    expect(seen.headers.dpop).toBeUndefined();
    expect(seen.headers.authorization).toBeUndefined();
    expect(JSON.stringify(seen.headers)).not.toContain(bound.access.split('.')[2]!);
    expect(seen.headers['user-id']).toBe(claimsOf(bound.access).sub);
    expect(fromBase64Lines(seen.headers.roles)).toEqual(['ws1']);
    expect(seen.headers.organization_id).toBe(org);
  });

  it.each([
    ['platform', () => platformPath()],
    ['forwarded', () => forwardedPath()],
  ])('refuses the bound token as Bearer on the %s route, naming DPoP', async (_kind, path) => {
    upstream.seen.length = 0;
    const res = await call(replicaA, path(), `Bearer ${bound.access}`, []);
    expectDpopRefusal(refusalOf(res), 'invalid_token', /bound to a key; use the DPoP scheme/);
    // With a proof beside it, still not as Bearer.
    const proved = await call(replicaA, path(), `Bearer ${bound.access}`, [await proofFor(path())]);
    expect(proved.status).toBe(401);
    expect(upstream.seen).toHaveLength(0);
  });

  it('refuses an unbound token with the DPoP scheme, as a problem of the token', async () => {
    const unbound = await accessTokenOf(member);
    const res = await call(replicaA, platformPath(), `DPoP ${unbound}`, [
      await proofFor(platformPath(), { accessToken: unbound }),
    ]);
    expectDpopRefusal(refusalOf(res), 'invalid_token', /not bound to a key; use Bearer/);
  });

  it('accepts a proof once: its replay is refused on the same replica and on the other', async () => {
    const proof = await proofFor(platformPath());
    expect((await call(replicaA, platformPath(), `DPoP ${bound.access}`, [proof])).status).toBe(
      200,
    );
    for (const replica of [replicaB, replicaA]) {
      const replayed = await call(replica, platformPath(), `DPoP ${bound.access}`, [proof]);
      expectDpopRefusal(refusalOf(replayed), 'invalid_dpop_proof', /used before/);
    }
  });

  describe('bad proofs, each refused with the DPoP challenge', () => {
    const path = () => platformPath();
    const other = async () => dpopKey();
    const claimsNow = () =>
      JSON.stringify({ jti: 'x', htm: 'GET', htu: `${publicUrl}${path()}`, iat: nowSeconds() });
    const header = (extra: Record<string, unknown>) =>
      JSON.stringify({ alg: 'ES256', typ: 'dpop+jwt', jwk: key.publicJwk, ...extra });
    const nested = `${'['.repeat(2000)}${']'.repeat(2000)}`;

    const cases: [string, () => string[] | Promise<string[]>, RegExp][] = [
      ['no DPoP header', () => [], /proof header is required/],
      ['an empty DPoP header', () => [''], /required|empty/],
      ['typ JWT', async () => [await proofFor(path(), { header: { typ: 'JWT' } })], /typ/],
      ['no jwk', async () => [await proofFor(path(), { header: { jwk: undefined } })], /jwk/],
      [
        'a private key in the jwk',
        async () => [await proofFor(path(), { header: { jwk: await exportJWK(key.privateKey) } })],
        /private key/,
      ],
      ['another key', async () => [await proofFor(path(), {}, await other())], /not the key/],
      [
        'a signature of another key',
        async () => [await proofFor(path(), { header: { jwk: key.publicJwk } }, await other())],
        /not valid/,
      ],
      ['another method', async () => [await proofFor(path(), { method: 'DELETE' })], /method/],
      [
        'another URL',
        async () => [await proofFor(path(), { url: `${publicUrl}/api/${org}/platform/users` })],
        /URL/,
      ],
      [
        'the replica’s own address instead of PUBLIC_URL',
        async () => [await proofFor(path(), { url: `${replicaA.url}${path()}` })],
        /URL/,
      ],
      ['an old iat', async () => [await proofFor(path(), { iat: nowSeconds() - 600 })], /old/],
      ['a future iat', async () => [await proofFor(path(), { iat: nowSeconds() + 600 })], /future/],
      ['no ath', async () => [await proofFor(path(), { accessToken: undefined })], /ath/],
      [
        'another token’s ath',
        async () => [await proofFor(path(), { accessToken: 'x.y.z' })],
        /ath/,
      ],
      ['no jti', async () => [await proofFor(path(), { claims: { jti: undefined } })], /jti/],
      [
        'alg none',
        () => [
          `${rawJws(header({ alg: 'none' }), claimsNow())
            .split('.')
            .slice(0, 2)
            .join('.')}.`,
        ],
        /compact JWS|not valid/,
      ],
      ['alg none, signed', () => [rawJws(header({ alg: 'none' }), claimsNow())], /not valid/],
      ['an HMAC alg', () => [rawJws(header({ alg: 'HS256' }), claimsNow())], /not valid/],
      ['malformed JSON in the header', () => [rawJws('{"alg":"ES256",', claimsNow())], /not valid/],
      ['malformed JSON in the claims', () => [rawJws(header({}), '{"jti":')], /not valid/],
      [
        'deeply nested JSON',
        () => [rawJws(header({ x: JSON.parse(nested) }), claimsNow())],
        /not valid/,
      ],
      ['a huge proof', () => [`${'A'.repeat(12_000)}.b.c`], /compact JWS/],
      ['text that is no JWS', () => ['not a proof'], /compact JWS/],
    ];

    it.each(cases)('%s', async (_what, proofs, message) => {
      const res = await call(replicaA, path(), `DPoP ${bound.access}`, await proofs());
      expectDpopRefusal(refusalOf(res), 'invalid_dpop_proof', message);
    });

    it('two DPoP headers', async () => {
      const first = await proofFor(path());
      const second = await proofFor(path());
      const answer = await rawRequest(
        replicaA.url,
        `GET ${path()} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: DPoP ${bound.access}\r\n` +
          `DPoP: ${first}\r\nDPoP: ${second}\r\nConnection: close\r\n\r\n`,
      );
      const body = JSON.parse(answer.body) as ApiResponse['body'];
      expectDpopRefusal(
        { status: answer.status, body, challenge: answer.headers['www-authenticate'] ?? '' },
        'invalid_dpop_proof',
        /Exactly one DPoP proof/,
      );
    });

    it('a DPoP header beyond the request head limit: 431 in the envelope', async () => {
      const res = await call(replicaA, path(), `DPoP ${bound.access}`, ['A'.repeat(40_000)]);
      expect({ status: res.status, result: res.body.result }).toEqual({
        status: 431,
        result: '431-00000',
      });
    });

    it('a malformed token with the DPoP scheme, as a problem of the token', async () => {
      const res = await call(replicaA, path(), 'DPoP not-a-token!', [await proofFor(path())]);
      expectDpopRefusal(refusalOf(res), 'invalid_token', /Malformed token/);
      const empty = await call(replicaA, path(), 'DPoP', [await proofFor(path())]);
      expect(empty.status).toBe(401);
      expect(empty.headers.get('www-authenticate')).toContain('DPoP');
    });
  });
});
