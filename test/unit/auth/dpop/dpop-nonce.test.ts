import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { createMemoryCache } from '../../../../src/cache/memory-cache.ts';
import { createNonceSource } from '../../../../src/auth/dpop/dpop-nonce.ts';
import { createProofChecker } from '../../../../src/auth/dpop/dpop-proof.ts';
import { createProofReplayStore } from '../../../../src/auth/dpop/dpop-replay.ts';
import { createDpopScheme } from '../../../../src/auth/dpop/dpop-scheme.ts';
import type { Principal } from '../../../../src/tenancy/principal.ts';
import { dpopKey, dpopProof } from '../../../helpers/dpop.ts';
import { manualClock } from '../../../helpers/test-clock.ts';

const SECRET = 'the-gateway-client-secret';

describe('server nonces (RFC 9449 section 9)', () => {
  it('are the same on every replica with the secret, and change with the slot', () => {
    const clock = manualClock();
    const replicaA = createNonceSource({ secret: SECRET, slotSeconds: 60, clock });
    const replicaB = createNonceSource({ secret: SECRET, slotSeconds: 60, clock });
    const nonce = replicaA.current();
    expect(nonce).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(replicaB.current()).toBe(nonce);
    expect(replicaB.accepts(nonce)).toBe(true);
    const other = createNonceSource({ secret: `${SECRET}-other`, slotSeconds: 60, clock });
    expect(other.accepts(nonce)).toBe(false);
    // A character past Latin-1 whose low byte is the nonce's (U+0141 is 0x41, 'A' + 0x100):
    // another text, however Buffer's latin1 would shorten it.
    const widened = String.fromCharCode(nonce.charCodeAt(0) + 0x100) + nonce.slice(1);
    for (const wrong of [undefined, 7, '', `${nonce}x`, nonce.toLowerCase(), widened]) {
      expect(replicaA.accepts(wrong), String(wrong)).toBe(wrong === nonce);
    }
  });

  it('accept the previous slot too, not the one before (the injected clock moves)', () => {
    const clock = manualClock(Date.UTC(2026, 10, 28, 12, 0, 0));
    const nonces = createNonceSource({ secret: SECRET, slotSeconds: 60, clock });
    const first = nonces.current();
    clock.advance(59_999);
    expect(nonces.current()).toBe(first);
    clock.advance(1);
    expect(nonces.current()).not.toBe(first);
    expect(nonces.accepts(first)).toBe(true);
    clock.advance(60_000);
    expect(nonces.accepts(first)).toBe(false);
  });

  it('are asked of a proof without the current one, before its jti is spent', async () => {
    const clock = manualClock();
    const key = await dpopKey();
    const nonces = createNonceSource({ secret: SECRET, slotSeconds: 60, clock });
    const scheme = createDpopScheme({
      check: createProofChecker({
        algorithms: ['ES256'],
        maxAgeSeconds: 60,
        aheadSeconds: 5,
        maxCachedKeys: 10,
        clock,
      }),
      replay: createProofReplayStore({ cache: createMemoryCache({ maxEntries: 9, clock }), clock }),
      htuBase: 'https://gw.example',
      algorithms: ['ES256'],
      nonces,
    });
    const path = '/api/acme/platform/workspaces';
    const token = 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln';
    const bound = { userId: 'u', boundKey: key.thumbprint } as Principal;
    const request = (proof: string) =>
      ({ method: 'GET', rawHeaders: ['DPoP', proof] }) as unknown as IncomingMessage;
    const proofWith = (nonce?: unknown) =>
      dpopProof(key, {
        method: 'GET',
        url: `https://gw.example${path}`,
        accessToken: token,
        iat: Math.floor(clock.now() / 1000),
        jti: 'same-jti',
        claims: { nonce },
      });

    for (const nonce of [undefined, 'not-the-nonce', 42]) {
      await expect(
        scheme.prove(request(await proofWith(nonce)), path, token, bound),
      ).rejects.toMatchObject({ scheme: 'dpop', reason: 'nonce_required' });
    }
    expect(scheme.nonce?.()).toBe(nonces.current());
    // The same jti, now with the nonce: accepted (the refusals did not spend it), then once only.
    const good = await proofWith(nonces.current());
    await scheme.prove(request(good), path, token, bound);
    await expect(scheme.prove(request(good), path, token, bound)).rejects.toMatchObject({
      reason: 'replayed_proof',
    });
  });
});
