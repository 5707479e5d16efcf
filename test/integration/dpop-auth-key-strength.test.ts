import { createHash, generateKeyPairSync, randomBytes, randomUUID, sign } from 'node:crypto';
import { calculateJwkThumbprint, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callApi } from '../helpers/api.ts';
import { claimsOf, createUser, passwordGrantBody, type TestUser } from '../helpers/keycloak.ts';
import { closeTestDb, createOrganization } from '../helpers/platform.ts';
import { dpopKey, dpopProof } from '../helpers/dpop.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { startReplica, type Replica } from '../helpers/replica.ts';
import { testEnv } from '../helpers/test-env.ts';

/** An RS256 DPoP key of `bits`, signed by node:crypto (jose refuses to sign with a weak one). */
async function rsaKey(bits: number) {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: bits });
  const jwk = publicKey.export({ format: 'jwk' }) as JWK;
  const thumbprint = await calculateJwkThumbprint(jwk);
  const proof = (claims: Record<string, unknown>) => {
    const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
    const signed = `${part({ alg: 'RS256', typ: 'dpop+jwt', jwk })}.${part(claims)}`;
    return `${signed}.${sign('sha256', Buffer.from(signed), privateKey).toString('base64url')}`;
  };
  return { thumbprint, proof };
}

/**
 * The token endpoint through `/auth` refuses a DPoP proof whose RSA key is shorter than the
 * gateway's `/api` check takes (2048 bits), before Keycloak binds a token to it; stronger RSA
 * keys and EC keys still get tokens that the API then serves.
 */
describe('DPoP proof key strength at the token endpoint', () => {
  const publicUrl = testEnv().publicUrl;
  let replica: Replica;
  let org: string;
  let member: TestUser;

  const tokenUrl = () => `${publicUrl}/auth/realms/${org}/protocol/openid-connect/token`;
  const grant = async (proof: string) => {
    const res = await fetch(`${replica.url}${new URL(tokenUrl()).pathname}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: proof },
      body: passwordGrantBody(member),
    });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };
  const claimsFor = (url: string, method: string) => ({
    jti: randomUUID(),
    htm: method,
    htu: url,
    iat: Math.floor(Date.now() / 1000),
  });

  beforeAll(async () => {
    replica = await startReplica(19986, {
      REDIS_URL: testEnv().redisUrl,
      REDIS_KEY_PREFIX: testEnv().redisKeyPrefix,
      REALMGATE_CACHE_SECRET: randomBytes(24).toString('base64url'),
    });
    org = await createOrganization(['ws1']);
    member = await createUser(org, { workspaceRoles: ['ws1'] });
  });

  afterAll(async () => {
    await replica?.gateway.close();
    await closeTestDb();
  });

  it.each([512, 1024])(
    'refuses a proof of a %i-bit RSA key: 400 invalid_dpop_proof',
    async (bits) => {
      const key = await rsaKey(bits);
      const answer = await grant(key.proof(claimsFor(tokenUrl(), 'POST')));
      expect(answer.status).toBe(400);
      expect(answer.json.error).toBe('invalid_dpop_proof');
      expect(answer.json.error_description).toBe(
        `The DPoP proof's RSA key has ${bits} bits; at least 2048 bits are needed.`,
      );
      expect(Object.keys(answer.json).sort()).toEqual(['error', 'error_description']);
    },
  );

  it('refuses several DPoP headers, so an empty one first hides no weak key from the check', async () => {
    const key = await rsaKey(1024);
    const body = passwordGrantBody(member);
    for (const proofs of [
      ['', key.proof(claimsFor(tokenUrl(), 'POST'))],
      ['x', 'x'],
    ]) {
      const head = [
        `POST ${new URL(tokenUrl()).pathname} HTTP/1.1`,
        'Host: 127.0.0.1',
        'Content-Type: application/x-www-form-urlencoded',
        `Content-Length: ${Buffer.byteLength(body)}`,
        ...proofs.map((proof) => `DPoP: ${proof}`),
      ];
      const answer = await rawRequest(replica.url, `${head.join('\r\n')}\r\n\r\n`, { body });
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.body)).toEqual({
        error: 'invalid_dpop_proof',
        error_description: 'Exactly one DPoP proof header is allowed.',
      });
    }
  });

  it('issues a token to a 2048-bit RSA key, and the API serves it', async () => {
    const key = await rsaKey(2048);
    const answer = await grant(key.proof(claimsFor(tokenUrl(), 'POST')));
    expect(answer.status).toBe(200);
    const token = String(answer.json.access_token);
    expect(claimsOf(token).cnf).toMatchObject({ jkt: key.thumbprint });
    const path = `/api/${org}/platform/workspaces`;
    const ath = createHash('sha256').update(token).digest('base64url');
    const proof = key.proof({ ...claimsFor(`${publicUrl}${path}`, 'GET'), ath });
    const res = await callApi(path, `DPoP ${token}`, {
      base: replica.url,
      headers: { dpop: proof },
    });
    expect(res.status).toBe(200);
  });

  it('issues a token to an EC P-256 key', async () => {
    const key = await dpopKey();
    const proof = await dpopProof(key, { method: 'POST', url: tokenUrl() });
    const answer = await grant(proof);
    expect(answer.status).toBe(200);
    expect(claimsOf(answer.json.access_token).cnf).toMatchObject({ jkt: key.thumbprint });
  });
});
