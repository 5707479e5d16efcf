import {
  createPublicKey,
  generateKeyPairSync,
  randomUUID,
  sign as signWithNode,
} from 'node:crypto';
import { generateKeyPair, SignJWT, type JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessTokenOf, callApi, type ApiResponse } from '../helpers/api.ts';
import { EVENTUALLY } from '../helpers/eventually.ts';
import { claimsOf, createUser, keycloakAdmin, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import {
  addGeneratedRsaKey,
  importRsaKey,
  importRsaPem,
  loginClaims,
  type HeldKey,
} from '../helpers/realm-keys.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { aheadClock } from '../helpers/test-clock.ts';
import { testEnv } from '../helpers/test-env.ts';

/**
 * Hostile Bearer tokens against the real Keycloak: every forgery, foreign, stale or malformed
 * token must end in 401 `401-00002` with a Bearer `invalid_token` challenge, and never be
 * echoed back. Each case uses a token string of its own, because the gateway remembers a
 * verified token (by its hash) until it expires.
 */

const ORGANIZATIONS_PATH = '/api/platform/organizations';
const MALFORMED = 'Malformed token.';
const BAD_SIGNATURE = 'Token signature is not valid.';
const ALG_NOT_ALLOWED = 'Token algorithm is not allowed.';
const FOREIGN_REALM = 'Token was not issued for this realm.';
const NOT_ACCESS_TOKEN = 'Not an access token.';

const workspacesPath = (org: string) => `/api/${org}/platform/workspaces`;
const issuerOf = (realm: string) => `${testEnv().publicUrl}/auth/realms/${realm}`;
const bearer = (token: string) => `Bearer ${token}`;
const nowSeconds = () => Math.floor(Date.now() / 1000);

// ---------------------------------------------------------------------------------------------
// Assertions
// ---------------------------------------------------------------------------------------------

/**
 * Asserts the gateway refused the request as an invalid Bearer token of `realm`, saying
 * `description` (when given), and that neither body nor challenge repeats the token.
 */
async function expectInvalidToken(
  path: string,
  realm: string,
  authorization: string,
  description: string | RegExp | undefined,
  token?: string,
  base?: string,
): Promise<ApiResponse> {
  const res = await callApi(path, authorization, { base });
  expect(res.status).toBe(401);
  expect(res.body.result).toBe('401-00002');
  expect(res.body.data).toBeNull();
  const challenge = res.headers.get('www-authenticate') ?? '';
  expect(challenge.startsWith(`Bearer realm="${realm}"`)).toBe(true);
  expect(challenge).toContain('error="invalid_token"');
  if (typeof description === 'string') {
    expect(res.body.message).toBe(description);
    // The challenge drops `"` and `\\` from the description rather than escaping them.
    expect(challenge).toContain(`error_description="${description.replace(/["\\]/g, '')}"`);
  } else if (description !== undefined) {
    expect(res.body.message).toMatch(description);
    expect(/error_description="([^"]*)"/.exec(challenge)?.[1]).toMatch(description);
  }
  if (token !== undefined) expectNotEchoed(res, token);
  return res;
}

/** Neither the body nor the challenge contains the token or its signature. */
function expectNotEchoed(res: ApiResponse, token: string): void {
  const signature = token.split('.')[2];
  const shown = `${JSON.stringify(res.body)}\n${res.headers.get('www-authenticate') ?? ''}`;
  expect(shown).not.toContain(token);
  if (signature) expect(shown).not.toContain(signature);
}

/** Asserts success; on failure the gateway's message shows why. */
function expectSuccess(res: ApiResponse): void {
  const { status, body } = res;
  expect({ status, result: body.result, message: body.message }).toEqual({
    status: 200,
    result: '000-00000',
    message: 'SUCCESS',
  });
}

/**
 * The workspace ids `/api/<org>/platform/workspaces` lists for `authorization` (asserting
 * success), on the test gateway or the one at `base`.
 */
async function listedWorkspaces(
  org: string,
  authorization: string,
  base?: string,
): Promise<string[]> {
  const res = await callApi(workspacesPath(org), authorization, { base });
  expectSuccess(res);
  return (res.body.data as Array<{ id: string }>).map((w) => w.id);
}

// ---------------------------------------------------------------------------------------------
// Token surgery
// ---------------------------------------------------------------------------------------------

function segmentsOf(token: string): [string, string, string] {
  const [header, payload, signature, ...rest] = token.split('.');
  if (header === undefined || payload === undefined || signature === undefined || rest.length) {
    throw new Error('not a compact JWS');
  }
  return [header, payload, signature];
}

function encodeSegment(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

function headerOf(token: string): Record<string, unknown> {
  const json = Buffer.from(segmentsOf(token)[0], 'base64url').toString('utf8');
  return JSON.parse(json) as Record<string, unknown>;
}

/** Replaces the middle character of `text` (the last one may only carry unused bits). */
function flipMiddleChar(text: string): string {
  const i = Math.floor(text.length / 2);
  const replacement = text[i] === 'A' ? 'B' : 'A';
  return `${text.slice(0, i)}${replacement}${text.slice(i + 1)}`;
}

/** The claims of a real access token, with a fresh `jti` so the forgery is a token of its own. */
function reusableClaims(token: string): JWTPayload {
  return { ...claimsOf(token), jti: randomUUID() };
}

// ---------------------------------------------------------------------------------------------
// Realm keys
// ---------------------------------------------------------------------------------------------

interface RealmJwk {
  kid: string;
  kty: string;
  alg?: string;
  use?: string;
  n?: string;
  e?: string;
  x5c?: string[];
}

/** The realm's public key set, straight from Keycloak. */
async function realmKeys(realm: string): Promise<RealmJwk[]> {
  const res = await fetch(`${testEnv().keycloakUrl}/realms/${realm}/protocol/openid-connect/certs`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { keys: RealmJwk[] }).keys;
}

/** The realm's RS256 signing key whose kid signed `token`. */
async function signingKeyOf(realm: string, token: string): Promise<RealmJwk> {
  const kid = headerOf(token).kid;
  const key = (await realmKeys(realm)).find((k) => k.kid === kid && k.kty === 'RSA');
  if (!key) throw new Error(`kid ${String(kid)} not in the key set of ${realm}`);
  return key;
}

/** Sets the access token lifespan of the realm's API client (attribute `access.token.lifespan`). */
async function setAccessTokenLifespan(realm: string, seconds: number): Promise<void> {
  const admin = await keycloakAdmin();
  const [client] = await admin.clients.find({ realm, clientId: `_${realm}-api` });
  if (!client?.id) throw new Error(`no API client in ${realm}`);
  await admin.clients.update(
    { realm, id: client.id },
    { ...client, attributes: { ...client.attributes, 'access.token.lifespan': String(seconds) } },
  );
}

/** Calls `path` until it answers `status` or `timeoutMs` passes; returns the last answer. */
async function pollUntilStatus(
  path: string,
  authorization: string,
  status: number,
): Promise<ApiResponse> {
  let res: ApiResponse | undefined;
  await expect
    .poll(async () => (res = await callApi(path, authorization)).status, {
      ...EVENTUALLY,
      interval: 500,
    })
    .toBe(status);
  return res!;
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

describe('hostile Bearer tokens', () => {
  let org: string;
  let member: TestUser;

  beforeAll(async () => {
    org = await createOrganization(['ws-a', 'ws-b']);
    member = await createUser(org, { workspaceRoles: ['ws-a'] });
  });
  afterAll(closeTestDb);

  it('accepts a genuine token of the realm (baseline)', async () => {
    expect(await listedWorkspaces(org, bearer(await accessTokenOf(member)))).toEqual(['ws-a']);
  });

  describe('tampered tokens', () => {
    it('rejects a token whose signature was altered', async () => {
      const [header, payload, signature] = segmentsOf(await accessTokenOf(member));
      const forged = `${header}.${payload}.${flipMiddleChar(signature)}`;
      await expectInvalidToken(workspacesPath(org), org, bearer(forged), BAD_SIGNATURE, forged);
    });

    it('rejects a token whose payload was altered under the original signature', async () => {
      const token = await accessTokenOf(member);
      const [header, payload, signature] = segmentsOf(token);
      const claims = { ...claimsOf(token), preferred_username: 'root' };
      const forged = `${header}.${encodeSegment(claims)}.${signature}`;
      expect(encodeSegment(claims)).not.toBe(payload);
      await expectInvalidToken(workspacesPath(org), org, bearer(forged), BAD_SIGNATURE, forged);
    });
  });

  describe('forged algorithms', () => {
    it('rejects an unsigned token (alg none) with the realm’s claims', async () => {
      const token = await accessTokenOf(member);
      const claims = encodeSegment(reusableClaims(token));
      const unsigned = `${encodeSegment({ alg: 'none', typ: 'JWT' })}.${claims}.`;
      await expectInvalidToken(workspacesPath(org), org, bearer(unsigned), ALG_NOT_ALLOWED);
      // The same, still carrying a genuine signature and the realm's kid.
      const kid = headerOf(token).kid;
      const withSignature = `${encodeSegment({ alg: 'none', typ: 'JWT', kid })}.${claims}.${segmentsOf(token)[2]}`;
      await expectInvalidToken(
        workspacesPath(org),
        org,
        bearer(withSignature),
        ALG_NOT_ALLOWED,
        withSignature,
      );
    });

    const publicKeySecrets: Array<[string, (jwk: RealmJwk) => Uint8Array]> = [
      ['the modulus n as text', (jwk) => new TextEncoder().encode(jwk.n)],
      ['the modulus n as bytes', (jwk) => Buffer.from(jwk.n ?? '', 'base64url')],
      [
        'the SPKI PEM',
        (jwk) => Buffer.from(publicKeyOf(jwk).export({ type: 'spki', format: 'pem' })),
      ],
      ['the SPKI DER', (jwk) => publicKeyOf(jwk).export({ type: 'spki', format: 'der' })],
    ];

    function publicKeyOf(jwk: RealmJwk) {
      return createPublicKey({ key: { kty: 'RSA', n: jwk.n, e: jwk.e }, format: 'jwk' });
    }

    it.each(publicKeySecrets)(
      'rejects HS256 keyed with the realm’s public key (%s) under the realm’s kid',
      async (_label, secretOf) => {
        const token = await accessTokenOf(member);
        const jwk = await signingKeyOf(org, token);
        expect(jwk.alg).toBe('RS256');
        const forged = await new SignJWT(reusableClaims(token))
          .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid: jwk.kid })
          .sign(secretOf(jwk));
        await expectInvalidToken(workspacesPath(org), org, bearer(forged), ALG_NOT_ALLOWED, forged);
      },
    );
  });

  describe('tokens of another realm', () => {
    let otherOrg: string;
    let otherMember: TestUser;
    let administrator: TestUser;

    beforeAll(async () => {
      otherOrg = await createOrganization(['ws-a']);
      otherMember = await createUser(otherOrg, { workspaceRoles: ['ws-a'] });
      administrator = await createUser('master');
    });

    it('rejects a master (administrator) token on an organization path', async () => {
      const token = await accessTokenOf(administrator);
      await expectInvalidToken(workspacesPath(org), org, bearer(token), FOREIGN_REALM, token);
    });

    it('rejects a token of organization A on organization B', async () => {
      const token = await accessTokenOf(otherMember);
      await expectInvalidToken(workspacesPath(org), org, bearer(token), FOREIGN_REALM, token);
    });

    it('rejects an organization token on the administrators’ path', async () => {
      const token = await accessTokenOf(member);
      await expectInvalidToken(ORGANIZATIONS_PATH, 'master', bearer(token), FOREIGN_REALM, token);
    });

    it('rejects a foreign token even after it was verified (and cached) for its own realm', async () => {
      const orgToken = await accessTokenOf(otherMember);
      expect(await listedWorkspaces(otherOrg, bearer(orgToken))).toEqual(['ws-a']);
      await expectInvalidToken(workspacesPath(org), org, bearer(orgToken), FOREIGN_REALM, orgToken);
      await expectInvalidToken(
        ORGANIZATIONS_PATH,
        'master',
        bearer(orgToken),
        FOREIGN_REALM,
        orgToken,
      );

      const adminToken = await accessTokenOf(administrator);
      expectSuccess(await callApi(ORGANIZATIONS_PATH, bearer(adminToken)));
      await expectInvalidToken(
        workspacesPath(org),
        org,
        bearer(adminToken),
        FOREIGN_REALM,
        adminToken,
      );
    });
  });

  describe('malformed Authorization values', () => {
    it('rejects "Bearer" without a token as an invalid Bearer token', async () => {
      // The scheme is Bearer, so the answer is a Bearer `invalid_token`, not "unsupported scheme".
      const res = await expectInvalidToken(workspacesPath(org), org, 'Bearer', undefined);
      expect(res.body.message).not.toMatch(/unsupported/i);
    });

    it('rejects a token of two parts', async () => {
      await expectInvalidToken(workspacesPath(org), org, 'Bearer a.b', MALFORMED);
    });

    it('rejects a 13 KB token (the head stays under the 16 KiB limit, so 401, not 431)', async () => {
      const huge = 'a'.repeat(13 * 1024);
      const res = await expectInvalidToken(workspacesPath(org), org, bearer(huge), MALFORMED, huge);
      expect(res.body.ts).toEqual(expect.any(String));
    });

    it('rejects a token with characters outside base64url', async () => {
      const [header, payload, signature] = segmentsOf(await accessTokenOf(member));
      // Outside the token68 alphabet altogether.
      const bang = `${header}.${payload}.${signature.slice(0, 20)}!${signature.slice(20)}`;
      await expectInvalidToken(workspacesPath(org), org, bearer(bang), MALFORMED, bang);
      // token68 allows `+` and `/`, base64url does not.
      const plus = `${header}.${payload}.${signature.slice(0, 20)}+/${signature.slice(22)}`;
      await expectInvalidToken(workspacesPath(org), org, bearer(plus), MALFORMED, plus);
      const inPayload = `${header}.${payload.slice(0, 10)}+${payload.slice(11)}.${signature}`;
      await expectInvalidToken(workspacesPath(org), org, bearer(inPayload), MALFORMED, inPayload);
    });

    it('accepts the scheme name in any case', async () => {
      for (const scheme of ['bearer', 'BEARER', 'bEaReR']) {
        const authorization = `${scheme} ${await accessTokenOf(member)}`;
        expect(await listedWorkspaces(org, authorization), scheme).toEqual(['ws-a']);
      }
    });

    it('answers an unsupported scheme with every challenge', async () => {
      const res = await callApi(workspacesPath(org), 'Digest abc');
      // RFC 9728 section 5.1: where the resource's metadata is.
      const metadata = `${testEnv().publicUrl}/.well-known/oauth-protected-resource/api/${org}`;
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ result: '401-00002', data: null });
      expect(res.body.message).toBe('Unsupported authorization scheme; use Basic, Bearer or DPoP.');
      expect(res.headers.get('www-authenticate')).toBe(
        `Bearer realm="${org}", resource_metadata="${metadata}", DPoP realm="${org}", algs="RS256 RS384 RS512 PS256 PS384 PS512 ES256 ES384 ES512 EdDSA", resource_metadata="${metadata}", Basic realm="${org}", charset="UTF-8"`,
      );
    });
  });
});

describe('expired Bearer tokens (a replica whose clock the test advances)', () => {
  const clock = aheadClock();
  let replica: Replica;
  let org: string;
  let member: TestUser;

  beforeAll(async () => {
    replica = await startReplica(19310, {}, undefined, clock);
    org = await createOrganization(['ws-a']);
    member = await createUser(org, { workspaceRoles: ['ws-a'] });
    // Fetch the realm's key set once now, so the token below is checked at once.
    const first = bearer(await accessTokenOf(member));
    expect(await listedWorkspaces(org, first, replica.url)).toEqual(['ws-a']);
    // A real lifespan the token's issue and first request (its re-check wait included) outlast
    // on a loaded machine; the test moves the replica's clock past it instead of waiting.
    await setAccessTokenLifespan(org, 60);
  });
  afterAll(async () => {
    await replica.gateway.close();
    await closeTestDb();
  });

  it('accepts a token until it expires, then rejects it (also from the cache)', async () => {
    const token = await accessTokenOf(member);
    const { iat, exp } = claimsOf(token);
    expect(Number(exp) - Number(iat)).toBe(60);
    expect(await listedWorkspaces(org, bearer(token), replica.url)).toEqual(['ws-a']);

    // The replica allows 1 s of clock leeway (TOKEN_CLOCK_LEEWAY_SECONDS); move past it.
    clock.advance(Math.max((Number(exp) + 2) * 1000 - clock.now(), 0));
    const path = workspacesPath(org);
    await expectInvalidToken(path, org, bearer(token), /expired/i, token, replica.url);
  });
});

describe('claims of tokens signed with a key the realm publishes', () => {
  let org: string;
  let key: HeldKey;
  let genuine: string;

  beforeAll(async () => {
    org = await createOrganization(['ws-a', 'ws-b']);
    key = await importRsaKey(org);
    genuine = await accessTokenOf(await createUser(org, { workspaceRoles: ['ws-a'] }));
  });
  afterAll(closeTestDb);

  /** The claims of a real login's token granting `ws-b` (loginClaims), with overrides and omissions. */
  function claims(overrides: JWTPayload = {}, omit: string[] = []): JWTPayload {
    const all: JWTPayload = { ...loginClaims(genuine, org, ['ws-b']), ...overrides };
    return Object.fromEntries(Object.entries(all).filter(([name]) => !omit.includes(name)));
  }

  function sign(
    payload: JWTPayload,
    signer: Pick<HeldKey, 'kid' | 'privateKey'> = key,
  ): Promise<string> {
    return new SignJWT(payload)
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: signer.kid })
      .sign(signer.privateKey);
  }

  it('keeps Keycloak’s own key as the realm’s signer', async () => {
    expect(headerOf(genuine).kid).not.toBe(key.kid);
    expect(await listedWorkspaces(org, bearer(genuine))).toEqual(['ws-a']);
  });

  it('publishes the imported key for signatures, with a certificate Keycloak made for it', async () => {
    const published = (await realmKeys(org)).find((k) => k.kid === key.kid);
    expect(published).toMatchObject({ kty: 'RSA', alg: 'RS256', use: 'sig' });
    expect(published?.x5c).toHaveLength(1);
  });

  it('accepts a well-formed token signed with the registered key', async () => {
    expect(await listedWorkspaces(org, bearer(await sign(claims())))).toEqual(['ws-b']);
  });

  const rejected: Array<[string, () => JWTPayload, string | RegExp]> = [
    [
      'nbf 60 s in the future',
      () => claims({ nbf: nowSeconds() + 60 }),
      'Token claim "nbf" is not valid.',
    ],
    ['typ ID', () => claims({ typ: 'ID' }), NOT_ACCESS_TOKEN],
    ['typ Refresh', () => claims({ typ: 'Refresh' }), NOT_ACCESS_TOKEN],
    ['typ Offline', () => claims({ typ: 'Offline' }), NOT_ACCESS_TOKEN],
    ['no typ', () => claims({}, ['typ']), NOT_ACCESS_TOKEN],
    [
      'iat 60 s in the future',
      () => claims({ iat: nowSeconds() + 60 }),
      'Token issued in the future.',
    ],
    ['no exp', () => claims({}, ['exp']), 'Token claim "exp" is not valid.'],
    ['no sub', () => claims({}, ['sub']), 'Token claim "sub" is not valid.'],
    [
      'exp in the past',
      () => claims({ iat: nowSeconds() - 120, exp: nowSeconds() - 60 }),
      /expired/i,
    ],
    ['the issuer of another realm', () => claims({ iss: issuerOf('master') }), FOREIGN_REALM],
    [
      'a foreign issuer',
      () => claims({ iss: `http://evil.example/auth/realms/${org}` }),
      FOREIGN_REALM,
    ],
    ['no iss', () => claims({}, ['iss']), FOREIGN_REALM],
  ];

  it.each(rejected)('rejects a token with %s', async (_label, build, description) => {
    const token = await sign(build());
    await expectInvalidToken(workspacesPath(org), org, bearer(token), description, token);
  });

  it('rejects a token signed with an unregistered key under the registered kid', async () => {
    const { privateKey } = await generateKeyPair('RS256');
    const token = await sign(claims(), { kid: key.kid, privateKey });
    await expectInvalidToken(workspacesPath(org), org, bearer(token), BAD_SIGNATURE, token);
  });

  it('rejects, never with a 500, a token naming a key the realm publishes that is too weak to use', async () => {
    // An administrator of the realm can import an RSA key of 1024 bits; Keycloak publishes it.
    // (jose neither makes nor signs with one: node's crypto does both.)
    const pair = generateKeyPairSync('rsa', { modulusLength: 1024 });
    const weak = await importRsaPem(
      org,
      pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    );
    expect((await realmKeys(org)).find((k) => k.kid === weak.kid)).toMatchObject({ kty: 'RSA' });
    const signingInput = [{ alg: 'RS256', typ: 'JWT', kid: weak.kid }, claims()]
      .map((part) => Buffer.from(JSON.stringify(part)).toString('base64url'))
      .join('.');
    const signature = signWithNode('sha256', Buffer.from(signingInput), pair.privateKey).toString(
      'base64url',
    );
    const signed = `${signingInput}.${signature}`;
    await expectInvalidToken(workspacesPath(org), org, bearer(signed), undefined, signed);
    // Its kid alone, signed by anyone: the same.
    const { privateKey } = await generateKeyPair('RS256');
    const forged = await sign(claims(), { kid: weak.kid, privateKey });
    await expectInvalidToken(workspacesPath(org), org, bearer(forged), undefined, forged);
  });
});

describe('signing key rotation', () => {
  afterAll(closeTestDb);

  it('accepts tokens of a new key without a restart and still accepts the old key', async () => {
    const org = await createOrganization(['ws-a']);
    const member = await createUser(org, { workspaceRoles: ['ws-a'] });

    // The gateway now holds the realm's key set with the first key only.
    const t0 = await accessTokenOf(member);
    expect(await listedWorkspaces(org, bearer(t0))).toEqual(['ws-a']);
    // Signed with the first key, but not yet shown to the gateway (so not cached).
    const t1 = await accessTokenOf(member);
    const firstKid = headerOf(t1).kid;
    expect(headerOf(t0).kid).toBe(firstKid);

    await addGeneratedRsaKey(org, 200);
    const t2 = await accessTokenOf(member);
    const secondKid = headerOf(t2).kid;
    expect(secondKid).not.toBe(firstKid);
    const published = (await realmKeys(org)).map((k) => k.kid);
    expect(published).toEqual(expect.arrayContaining([firstKid, secondKid]));

    // An unknown kid makes the gateway refetch the key set, at most once per 10 s.
    const rotated = await pollUntilStatus(workspacesPath(org), bearer(t2), 200);
    expectSuccess(rotated);
    expect(rotated.body.data).toEqual([expect.objectContaining({ id: 'ws-a' })]);

    expect(await listedWorkspaces(org, bearer(t1))).toEqual(['ws-a']);
  });
});
