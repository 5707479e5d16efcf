import { calculateJwkThumbprint, decodeJwt, decodeProtectedHeader } from 'jose';
import { describe, expect, it } from 'vitest';
import { newProofKey, proofPool, proofsFor } from '../../../bench/dpop-proofs.ts';
import { createProofChecker } from '../../../src/auth/dpop/dpop-proof.ts';
import { ASYMMETRIC_ALGORITHMS } from '../../../src/config/jws-algorithms.ts';

const HTU = 'http://127.0.0.1:28000/api/bench/workspaces/ws1/ita/menu/operation_list/filter/';
const TOKEN = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln';

describe("the DPoP row's proofs", () => {
  it("each passes the gateway's own proof check, with a jti of its own", async () => {
    const key = newProofKey();
    const spec = { privateJwk: key, method: 'GET', htu: HTU, accessToken: TOKEN };
    const proofs = proofPool(spec, 20);
    const check = createProofChecker({
      algorithms: ASYMMETRIC_ALGORITHMS,
      maxAgeSeconds: 60,
      aheadSeconds: 5,
      maxCachedKeys: 10,
    });
    const { kty, crv, x, y } = key;
    const boundKey = await calculateJwkThumbprint({ kty, crv, x, y }, 'sha256');
    const request = { method: 'GET', htu: HTU, accessToken: TOKEN, boundKey };
    const checked = await Promise.all(proofs.map((proof) => check(proof, request)));
    expect(new Set(checked.map((c) => c.jti)).size).toBe(20);
    // Another token's request: the proofs' `ath` names this one only.
    await expect(check(proofs[0]!, { ...request, accessToken: `${TOKEN}x` })).rejects.toMatchObject(
      { reason: 'bad_proof' },
    );
  });

  it('carries only the public half of the key, and no ath on a token request', () => {
    const [proof] = proofPool({ privateJwk: newProofKey(), method: 'POST', htu: HTU }, 1);
    const header = decodeProtectedHeader(proof!);
    expect(Object.keys(header.jwk ?? {}).sort()).toEqual(['crv', 'kty', 'x', 'y']);
    expect({ ...header, jwk: undefined }).toEqual({
      typ: 'dpop+jwt',
      alg: 'ES256',
      jwk: undefined,
    });
    expect(Object.keys(decodeJwt(proof!)).sort()).toEqual(['htm', 'htu', 'iat', 'jti']);
  });

  it("sizes a round's pool for its length at the ceiling rate", () => {
    expect(proofsFor(5, 12_000)).toBe(60_000);
    expect(proofsFor(2.5, 1_000)).toBe(2_500);
  });
});
