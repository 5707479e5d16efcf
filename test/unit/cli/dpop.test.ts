import { createHash } from 'node:crypto';
import { calculateJwkThumbprint, decodeProtectedHeader, EmbeddedJWK, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  dpopProof,
  generateDpopKey,
  isDpopKey,
  sendWithProof,
  thumbprintOf,
  type ProofAnswer,
} from '../../../src/cli/dpop.ts';

const TOKEN = 'eyJhbGciOiJFUzI1NiJ9.e30.c2lnbmF0dXJl';

async function claimsOf(proof: string) {
  // EmbeddedJWK: the signature checks against the header's own key, as a server checks it.
  const { payload, protectedHeader } = await jwtVerify(proof, EmbeddedJWK, {
    typ: 'dpop+jwt',
    algorithms: ['ES256'],
  });
  return { payload, protectedHeader };
}

function answer(status: number, headers: Record<string, string> = {}, text = ''): ProofAnswer {
  return { status, headers: new Headers(headers), text };
}

describe('a login key and its proofs (RFC 9449)', () => {
  it('makes a P-256 key whose proofs carry the public half only, signed by it', async () => {
    const key = await generateDpopKey();
    expect(isDpopKey(key)).toBe(true);
    const proof = await dpopProof(key, {
      method: 'post',
      url: 'https://gw.example/auth/realms/acme/protocol/openid-connect/token?x=1#frag',
    });
    const { payload, protectedHeader } = await claimsOf(proof);
    expect(protectedHeader.jwk).toEqual({ kty: 'EC', crv: 'P-256', x: key.x, y: key.y });
    expect(JSON.stringify(decodeProtectedHeader(proof))).not.toContain(key.d);
    expect(payload).toMatchObject({
      htm: 'POST',
      htu: 'https://gw.example/auth/realms/acme/protocol/openid-connect/token',
    });
    expect(payload).not.toHaveProperty('ath');
    expect(typeof payload.jti).toBe('string');
    expect(Math.abs(payload.iat! - Date.now() / 1000)).toBeLessThan(120);
    expect(await thumbprintOf(key)).toBe(await calculateJwkThumbprint(protectedHeader.jwk!));
  });

  it("binds an API call's proof to its token (ath) and gives every proof its own jti", async () => {
    const key = await generateDpopKey();
    const target = { method: 'GET', url: new URL('http://gw/api/acme/platform/workspaces') };
    const one = await claimsOf(await dpopProof(key, { ...target, accessToken: TOKEN }));
    const two = await claimsOf(await dpopProof(key, { ...target, accessToken: TOKEN }));
    expect(one.payload.ath).toBe(createHash('sha256').update(TOKEN).digest('base64url'));
    expect(one.payload.jti).not.toBe(two.payload.jti);
  });

  it('refuses anything but its own key shape when read back', async () => {
    const key = await generateDpopKey();
    expect(isDpopKey({ ...key, crv: 'P-384' })).toBe(false);
    expect(isDpopKey({ ...key, d: undefined })).toBe(false);
    expect(isDpopKey({ ...key, x: 'not base64url!' })).toBe(false);
    expect(isDpopKey('key')).toBe(false);
  });
});

describe('sendWithProof', () => {
  it('sends no proof without a key', async () => {
    const sent: Array<string | undefined> = [];
    await sendWithProof(undefined, { method: 'GET', url: 'http://gw/' }, (proof) => {
      sent.push(proof);
      return Promise.resolve(answer(200));
    });
    expect(sent).toEqual([undefined]);
  });

  it('retries once with the nonce a token endpoint or a resource server asks for', async () => {
    const key = await generateDpopKey();
    const asks = [
      answer(400, { 'dpop-nonce': 'n-1' }, '{"error":"use_dpop_nonce"}'),
      answer(401, {
        'dpop-nonce': 'n-1',
        'www-authenticate': 'DPoP error="use_dpop_nonce", algs="ES256"',
      }),
    ];
    for (const ask of asks) {
      const proofs: string[] = [];
      const final = await sendWithProof(key, { method: 'POST', url: 'http://gw/t' }, (proof) => {
        proofs.push(proof!);
        // It asks every time: the second refusal is the answer, no third try.
        return Promise.resolve(ask);
      });
      expect(final).toBe(ask);
      expect(proofs).toHaveLength(2);
      expect((await claimsOf(proofs[0]!)).payload).not.toHaveProperty('nonce');
      expect((await claimsOf(proofs[1]!)).payload.nonce).toBe('n-1');
    }
  });

  it('does not retry other refusals, or a nonce that could not travel in a proof', async () => {
    const key = await generateDpopKey();
    const others = [
      answer(400, { 'dpop-nonce': 'n-1' }, '{"error":"invalid_dpop_proof"}'),
      answer(401, { 'www-authenticate': 'DPoP error="use_dpop_nonce"' }),
      answer(400, { 'dpop-nonce': 'a"b' }, '{"error":"use_dpop_nonce"}'),
      answer(200, { 'dpop-nonce': 'n-2' }, '{}'),
    ];
    for (const other of others) {
      let count = 0;
      await sendWithProof(key, { method: 'POST', url: 'http://gw/t' }, () => {
        count += 1;
        return Promise.resolve(other);
      });
      expect(count).toBe(1);
    }
  });
});
