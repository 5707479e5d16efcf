import type { IncomingMessage } from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { createMemoryCache } from '../../../../src/cache/memory-cache.ts';
import { createProofChecker } from '../../../../src/auth/dpop/dpop-proof.ts';
import { createProofReplayStore } from '../../../../src/auth/dpop/dpop-replay.ts';
import { createDpopScheme, type DpopScheme } from '../../../../src/auth/dpop/dpop-scheme.ts';
import type { Principal } from '../../../../src/tenancy/principal.ts';
import { dpopKey, dpopProof, type DpopKey } from '../../../helpers/dpop.ts';
import { manualClock } from '../../../helpers/test-clock.ts';

const clock = manualClock();
const NOW = Math.floor(clock.now() / 1000);
const BASE = 'https://gw.example';
const PATH = '/api/acme/platform/workspaces';
const TOKEN = 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln';

let key: DpopKey;
let bound: Principal;
let scheme: DpopScheme;
beforeAll(async () => {
  key = await dpopKey();
  bound = { userId: 'u', boundKey: key.thumbprint } as Principal;
  scheme = createDpopScheme({
    check: createProofChecker({
      algorithms: ['ES256', 'RS256'],
      maxAgeSeconds: 60,
      aheadSeconds: 5,
      maxCachedKeys: 10,
      clock,
    }),
    replay: createProofReplayStore({ cache: createMemoryCache({ maxEntries: 100, clock }), clock }),
    htuBase: BASE,
    algorithms: ['ES256', 'RS256'],
  });
});

/** A GET with these DPoP header values, as node reads them. */
function request(...proofs: string[]): IncomingMessage {
  const rawHeaders = proofs.flatMap((proof) => ['DPoP', proof]);
  return {
    method: 'GET',
    headersDistinct: proofs.length === 0 ? {} : { dpop: proofs },
    rawHeaders,
  } as unknown as IncomingMessage;
}

const proof = (iat = NOW) =>
  dpopProof(key, { method: 'GET', url: BASE + PATH, accessToken: TOKEN, iat });

describe('the DPoP scheme', () => {
  it('names its algorithms for the challenge', () => {
    expect(scheme.algs).toBe('ES256 RS256');
  });

  it('accepts a proof once; its replay is refused, a fresh proof passes', async () => {
    const made = await proof();
    await scheme.prove(request(made), PATH, TOKEN, bound);
    await expect(scheme.prove(request(made), PATH, TOKEN, bound)).rejects.toMatchObject({
      scheme: 'dpop',
      reason: 'replayed_proof',
    });
    await expect(scheme.prove(request(await proof()), PATH, TOKEN, bound)).resolves.toBeUndefined();
  });

  it('remembers a jti as long as its iat is in the window, no longer', async () => {
    const made = await proof(NOW);
    await scheme.prove(request(made), PATH, TOKEN, bound);
    clock.advance(59_000);
    await expect(scheme.prove(request(made), PATH, TOKEN, bound)).rejects.toMatchObject({
      reason: 'replayed_proof',
    });
    clock.advance(2_000);
    // Out of the window: refused as too old, not as a replay.
    await expect(scheme.prove(request(made), PATH, TOKEN, bound)).rejects.toMatchObject({
      reason: 'bad_proof',
    });
    clock.advance(-61_000);
  });

  it('refuses no proof, an empty one and two', async () => {
    const made = await proof();
    for (const req of [request(), request(''), request(made, made)]) {
      await expect(scheme.prove(req, PATH, TOKEN, bound)).rejects.toMatchObject({
        scheme: 'dpop',
        reason: 'bad_proof',
      });
    }
  });

  it('refuses an unbound token before reading any proof, as a problem of the token', async () => {
    const unbound = { userId: 'u' } as Principal;
    await expect(scheme.prove(request(), PATH, TOKEN, unbound)).rejects.toMatchObject({
      scheme: 'dpop',
      reason: 'bad_token',
    });
  });

  it('checks htu against the path the edge read', async () => {
    await expect(
      scheme.prove(request(await proof()), '/api/acme/platform/users', TOKEN, bound),
    ).rejects.toThrow(/another URL/);
  });
});
