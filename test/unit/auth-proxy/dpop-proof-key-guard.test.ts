import { generateKeyPairSync } from 'node:crypto';
import type { Request, Response } from 'express';
import { describe, expect, it } from 'vitest';
import { guardDpopProofKey } from '../../../src/auth-proxy/dpop-proof-key-guard.ts';
import { dpopKey, dpopProof, rawJws } from '../../helpers/dpop.ts';

const URL = 'https://gw.example/auth/realms/acme/protocol/openid-connect/token';

/**
 * What the guard did with a request carrying `dpop` (several: one `DPoP` header each): passed it
 * on, or its answer.
 */
function guarded(dpop: string | string[] | undefined, algorithms = ['ES256', 'RS256']) {
  let answer: { status: number; body: unknown } | 'next' | undefined;
  let status = 0;
  const res = {
    writeHead(code: number, headers: Record<string, string>) {
      // Its refusal is the token endpoint's: never kept by a cache.
      expect(headers['cache-control']).toBe('no-store');
      status = code;
    },
    end: (body: string) => void (answer = { status, body: JSON.parse(body) as unknown }),
  } as unknown as Response;
  const rawHeaders = [dpop ?? []].flat().flatMap((value) => ['DPoP', value]);
  const req = { rawHeaders } as unknown as Request;
  guardDpopProofKey(algorithms)(req, res, () => (answer = 'next'));
  return answer;
}

const rsaHeader = (bits: number, alg = 'RS256') =>
  JSON.stringify({
    alg,
    typ: 'dpop+jwt',
    jwk: generateKeyPairSync('rsa', { modulusLength: bits }).publicKey.export({ format: 'jwk' }),
  });

describe('the token endpoint step of which keys may sign DPoP proofs', () => {
  it.each([512, 1024, 2040])('refuses a proof of a %i-bit RSA key as Keycloak words it', (bits) => {
    expect(guarded(rawJws(rsaHeader(bits), '{}'))).toEqual({
      status: 400,
      body: {
        error: 'invalid_dpop_proof',
        error_description: `The DPoP proof's RSA key has ${bits} bits; at least 2048 bits are needed.`,
      },
    });
  });

  it('refuses an alg outside DPOP_ALGORITHMS, never repeating it', () => {
    const answer = guarded(rawJws(rsaHeader(2048, 'PS512'), '{}'));
    expect(answer).toEqual({
      status: 400,
      body: {
        error: 'invalid_dpop_proof',
        error_description: 'The DPoP proof\'s "alg" is not one of ES256, RS256.',
      },
    });
  });

  it('passes a 2048-bit RSA key and an EC key on: Keycloak judges the rest', async () => {
    expect(guarded(rawJws(rsaHeader(2048), '{}'))).toBe('next');
    const proof = await dpopProof(await dpopKey(), { method: 'POST', url: URL });
    expect(guarded(proof)).toBe('next');
  });

  it('passes on no proof and one it cannot read, for Keycloak to answer', () => {
    for (const dpop of [undefined, 'not-a-jws', 'a.b.c', rawJws('[1]', '{}')]) {
      expect(guarded(dpop), String(dpop)).toBe('next');
    }
  });

  it('refuses several DPoP headers and an empty one: Keycloak would read one it was not shown', () => {
    const weak = rawJws(rsaHeader(1024), '{}');
    for (const [dpop, said] of [
      [['', weak], 'Exactly one DPoP proof header is allowed.'],
      [['not-a-jws', 'not-a-jws'], 'Exactly one DPoP proof header is allowed.'],
      ['', 'The DPoP proof header is empty.'],
    ] as const) {
      expect(guarded([dpop].flat()), String(dpop)).toEqual({
        status: 400,
        body: { error: 'invalid_dpop_proof', error_description: said },
      });
    }
  });
});
