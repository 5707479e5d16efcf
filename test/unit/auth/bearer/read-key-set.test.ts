import { generateKeyPairSync } from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import { describe, expect, it } from 'vitest';
import { readKeySet } from '../../../../src/auth/bearer/read-key-set.ts';

async function rsaJwk(kid: string, extra: JWK = {}): Promise<JWK> {
  const { publicKey } = await generateKeyPair('RS256');
  return { ...(await exportJWK(publicKey)), kid, alg: 'RS256', ...extra };
}

describe("reading Keycloak's key set", () => {
  it('holds only keys that can verify a signature', async () => {
    const weak = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey;
    const { publicKey: ec } = await generateKeyPair('ES256');
    const keys: JWK[] = [
      await rsaJwk('sig', { use: 'sig' }),
      await rsaJwk('no-use'),
      { ...(await exportJWK(ec)), kid: 'ec', alg: 'ES256', use: 'sig' },
      await rsaJwk('enc', { use: 'enc', alg: 'RSA-OAEP' }),
      { kty: 'oct', k: 'c2VjcmV0', kid: 'oct', alg: 'HS256', use: 'sig' },
      { ...weak.export({ format: 'jwk' }), kid: 'weak', alg: 'RS256', use: 'sig' },
      { kty: 'RSA', kid: 'no-e', n: (await rsaJwk('x')).n, alg: 'RS256', use: 'sig' },
    ];
    const set = readKeySet(200, JSON.stringify({ keys }));
    expect([...set.kids].sort()).toEqual(['ec', 'no-use', 'sig']);
  });

  it('refuses an answer whose keys are not objects', () => {
    expect(() => readKeySet(200, '{"keys":[1]}')).toThrow();
    expect(() => readKeySet(200, '{"keys":{}}')).toThrow();
    expect(() => readKeySet(200, 'nope')).toThrow();
  });
});
