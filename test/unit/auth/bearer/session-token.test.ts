import {
  createLocalJWKSet,
  exportJWK,
  generateKeyPair,
  SignJWT,
  type CryptoKey,
  type JWK,
} from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { createSessionTokenCheck } from '../../../../src/auth/bearer/session-token.ts';

const PUBLIC_URL = 'https://gw.example';
const REALM = 'acme';
const ISSUER = `${PUBLIC_URL}/auth/realms/${REALM}`;

let realmKey: CryptoKey;
let otherKey: CryptoKey;
let signedBy: ReturnType<typeof createSessionTokenCheck>;

beforeAll(async () => {
  const pair = await generateKeyPair('RS256', { extractable: true });
  realmKey = pair.privateKey;
  const other = await generateKeyPair('RS256', { extractable: true });
  otherKey = other.privateKey;
  const jwkOf = async (key: CryptoKey, kid: string): Promise<JWK> => ({
    ...(await exportJWK(key)),
    kid,
    use: 'sig',
    alg: 'RS256',
  });
  const keySets: Record<string, ReturnType<typeof createLocalJWKSet>> = {
    [REALM]: createLocalJWKSet({ keys: [await jwkOf(pair.publicKey, 'k1')] }),
    beta: createLocalJWKSet({ keys: [await jwkOf(other.publicKey, 'k2')] }),
  };
  signedBy = createSessionTokenCheck({
    jwks: { keySetFor: (realm) => keySets[realm] ?? createLocalJWKSet({ keys: [] }) },
    publicUrl: PUBLIC_URL,
  });
});

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** An access token of session s1 of the realm, with `changes`. */
function claims(changes: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    iss: ISSUER,
    sub: 'u1',
    sid: 's1',
    typ: 'Bearer',
    iat: nowSeconds(),
    exp: nowSeconds() + 300,
    ...changes,
  };
}

const sign = (payload: Record<string, unknown>, key = realmKey, kid = 'k1', alg = 'RS256') =>
  new SignJWT(payload).setProtectedHeader({ alg, kid, typ: 'JWT' }).sign(key);

describe("whether a token refused on /auth is its session realm's", () => {
  it('is for a token the realm signed in that session, past its lifetime too', async () => {
    expect(await signedBy(REALM, 's1', await sign(claims()))).toBe(true);
    const expired = claims({ iat: nowSeconds() - 3600, exp: nowSeconds() - 1800 });
    expect(await signedBy(REALM, 's1', await sign(expired))).toBe(true);
  });

  it("is for an access token only, bound to a key or not: not for the realm's other tokens of the session", async () => {
    // A bound token, as Keycloak names one (`typ` DPoP, `cnf.jkt` its key's thumbprint).
    const jkt = 'nXcXKkzd1D-6gq3BTbhJ6g_4tuTdjWnkzJyMxjDLcN0';
    expect(await signedBy(REALM, 's1', await sign(claims({ typ: 'DPoP', cnf: { jkt } })))).toBe(
      true,
    );
    // The realm signs the session's ID and logout tokens with the same keys, and they name its
    // `sid` too; an ID token travels where its access token does not (a logout URL's query).
    expect(await signedBy(REALM, 's1', await sign(claims({ typ: 'ID' })))).toBe(false);
    expect(await signedBy(REALM, 's1', await sign(claims({ typ: 'Logout' })))).toBe(false);
    expect(await signedBy(REALM, 's1', await sign(claims({ typ: undefined })))).toBe(false);
  });

  it("is not for a token naming the session with a signature that is not the realm's", async () => {
    const genuine = await sign(claims());
    const [header, payload] = genuine.split('.');
    const forged = `${header}.${payload}.${Buffer.alloc(256, 7).toString('base64url')}`;
    expect(await signedBy(REALM, 's1', forged)).toBe(false);
    // Another realm's key under the realm's kid, or an unsigned token.
    expect(await signedBy(REALM, 's1', await sign(claims(), otherKey))).toBe(false);
    const none = [{ alg: 'none', kid: 'k1' }, claims()]
      .map((part) => Buffer.from(JSON.stringify(part)).toString('base64url'))
      .join('.');
    expect(await signedBy(REALM, 's1', `${none}.`)).toBe(false);
  });

  it("is not for another session's token, another realm's, or one no key of the gateway verifies", async () => {
    expect(await signedBy(REALM, 's2', await sign(claims()))).toBe(false);
    expect(await signedBy(REALM, 's1', await sign(claims({ sid: undefined })))).toBe(false);
    // Signed by realm beta and naming it: not a token of the realm the session was issued in.
    const beta = claims({ iss: `${PUBLIC_URL}/auth/realms/beta` });
    expect(await signedBy(REALM, 's1', await sign(beta, otherKey, 'k2'))).toBe(false);
    expect(await signedBy('beta', 's1', await sign(claims(), otherKey, 'k2'))).toBe(false);
    // Keycloak's refresh tokens are HMAC: no key the gateway holds verifies one.
    const hmac = await new SignJWT(claims({ typ: 'Refresh' }))
      .setProtectedHeader({ alg: 'HS512', kid: 'k1' })
      .sign(new Uint8Array(64).fill(1));
    expect(await signedBy(REALM, 's1', hmac)).toBe(false);
    expect(await signedBy(REALM, 's1', 'not-a-token')).toBe(false);
  });
});
