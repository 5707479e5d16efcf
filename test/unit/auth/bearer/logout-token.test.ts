import { createLocalJWKSet, exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  BACKCHANNEL_LOGOUT_EVENT,
  createLogoutTokenVerifier,
} from '../../../../src/auth/bearer/logout-token.ts';
import { manualClock } from '../../../helpers/test-clock.ts';

const PUBLIC_URL = 'https://gw.example';
const REALM = 'acme';
const ISSUER = `${PUBLIC_URL}/auth/realms/${REALM}`;
const clock = manualClock();
const now = () => Math.floor(clock.now() / 1000);

let realmKey: CryptoKey;
let otherKey: CryptoKey;
let verify: ReturnType<typeof createLogoutTokenVerifier>;

beforeAll(async () => {
  const pair = await generateKeyPair('RS256', { extractable: true });
  realmKey = pair.privateKey;
  otherKey = (await generateKeyPair('RS256')).privateKey;
  const jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', use: 'sig', alg: 'RS256' };
  const keySets: Record<string, ReturnType<typeof createLocalJWKSet>> = {
    [REALM]: createLocalJWKSet({ keys: [jwk] }),
    master: createLocalJWKSet({ keys: [] }),
  };
  verify = createLogoutTokenVerifier({
    jwks: { keySetFor: (realm) => keySets[realm] ?? createLocalJWKSet({ keys: [] }) },
    publicUrl: PUBLIC_URL,
    audiencesOf: (realm) => [`_${realm}-api`, 'realmgate-gateway'],
    maxAgeSeconds: 120,
    leewaySeconds: 5,
    clock,
  });
});

/** Keycloak's logout token for a session of user u1, with `changes` (undefined removes). */
function claims(changes: Record<string, unknown> = {}): Record<string, unknown> {
  const base: Record<string, unknown> = {
    iss: ISSUER,
    aud: `_${REALM}-api`,
    iat: now(),
    exp: now() + 120,
    jti: `jti-${Math.random()}`,
    sid: 's1',
    sub: 'u1',
    typ: 'Logout',
    events: { [BACKCHANNEL_LOGOUT_EVENT]: {} },
  };
  const all = { ...base, ...changes };
  return Object.fromEntries(Object.entries(all).filter(([, value]) => value !== undefined));
}

const sign = (payload: Record<string, unknown>, key = realmKey, kid = 'k1') =>
  new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid, typ: 'logout+jwt' }).sign(key);

const unsigned = (payload: Record<string, unknown>) =>
  [{ alg: 'none', kid: 'k1' }, payload]
    .map((part) => Buffer.from(JSON.stringify(part)).toString('base64url'))
    .join('.') + '.';

describe('a logout token as section 2.6 says', () => {
  it('names its session and user when every check holds', async () => {
    const verdict = await verify(await sign(claims({ jti: 'j1' })));
    expect(verdict).toEqual({
      token: { realm: REALM, issuer: ISSUER, tokenId: 'j1', sessionId: 's1', userId: 'u1' },
    });
  });

  it('takes `sub` alone, `sid` alone, the gateway client as audience and an audience list', async () => {
    expect(await verify(await sign(claims({ sid: undefined })))).toMatchObject({
      token: { userId: 'u1', sessionId: undefined },
    });
    expect(await verify(await sign(claims({ sub: undefined })))).toMatchObject({
      token: { sessionId: 's1', userId: undefined },
    });
    expect(await verify(await sign(claims({ aud: 'realmgate-gateway' })))).toHaveProperty('token');
    expect(await verify(await sign(claims({ aud: ['x', `_${REALM}-api`] })))).toHaveProperty(
      'token',
    );
  });

  it.each([
    ['garbage', () => 'not a token', 'malformed'],
    ['a token far too long', () => `${'a'.repeat(9000)}.b.c`, 'malformed'],
    [
      'another issuer',
      async () => sign(claims({ iss: 'https://evil.example/auth/realms/acme' })),
      'unknown_issuer',
    ],
    [
      'an issuer naming no realm',
      async () => sign(claims({ iss: `${PUBLIC_URL}/auth/realms/` })),
      'unknown_issuer',
    ],
    [
      'a realm id outside the alphabet',
      async () => sign(claims({ iss: `${PUBLIC_URL}/auth/realms/A/b` })),
      'unknown_issuer',
    ],
    ['alg none', () => unsigned(claims()), 'bad_signature'],
    ['a key the realm does not publish', async () => sign(claims(), otherKey), 'bad_signature'],
    [
      'another key under the realm kid',
      async () => sign(claims(), otherKey, 'k1'),
      'bad_signature',
    ],
    [
      'another realm signing (its key set)',
      async () => sign(claims({ iss: `${PUBLIC_URL}/auth/realms/master` })),
      'bad_signature',
    ],
    ['another client as audience', async () => sign(claims({ aud: 'app-a' })), 'wrong_audience'],
    ['no audience', async () => sign(claims({ aud: undefined })), 'wrong_audience'],
    ['iat older than the window', async () => sign(claims({ iat: now() - 126 })), 'stale'],
    ['iat ahead of the clock', async () => sign(claims({ iat: now() + 6 })), 'stale'],
    ['no iat', async () => sign(claims({ iat: undefined })), 'malformed'],
    ['an expired token', async () => sign(claims({ exp: now() - 10 })), 'stale'],
    ['no exp (section 2.4 requires it)', async () => sign(claims({ exp: undefined })), 'malformed'],
    ['no events', async () => sign(claims({ events: undefined })), 'no_event'],
    [
      'events without the logout member',
      async () => sign(claims({ events: { other: {} } })),
      'no_event',
    ],
    [
      'the logout member not an object',
      async () => sign(claims({ events: { [BACKCHANNEL_LOGOUT_EVENT]: 'yes' } })),
      'no_event',
    ],
    [
      'neither sid nor sub',
      async () => sign(claims({ sid: undefined, sub: undefined })),
      'no_subject',
    ],
    ['a sid that is no id', async () => sign(claims({ sid: 'a b' })), 'no_subject'],
    ['a nonce', async () => sign(claims({ nonce: 'n' })), 'nonce'],
    ['no jti', async () => sign(claims({ jti: undefined })), 'malformed'],
  ])('refuses %s', async (_name, token, fault) => {
    expect(await verify(await token())).toEqual({ refused: fault });
  });

  it('accepts iat within the window, its leeway included', async () => {
    expect(await verify(await sign(claims({ iat: now() - 124 })))).toHaveProperty('token');
    expect(await verify(await sign(claims({ iat: now() + 4 })))).toHaveProperty('token');
  });
});
