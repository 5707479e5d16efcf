import { beforeAll, describe, expect, it, vi } from 'vitest';

// jose's full check, counted: a proof of a kept header skips it (node:crypto checks it at once).
const jose = vi.hoisted(() => ({ fullChecks: 0 }));
vi.mock('jose', async (importOriginal) => {
  const original = await importOriginal<typeof import('jose')>();
  return {
    ...original,
    jwtVerify: (...args: Parameters<typeof original.jwtVerify>) => {
      jose.fullChecks++;
      return original.jwtVerify(...args);
    },
  };
});

const { createProofChecker } = await import('../../../../src/auth/dpop/dpop-proof.ts');
const { dpopKey, dpopProof } = await import('../../../helpers/dpop.ts');
const { manualClock } = await import('../../../helpers/test-clock.ts');

const clock = manualClock();
const NOW = Math.floor(clock.now() / 1000);
const URL = 'https://gw.example/api/acme/jobs';
const TOKEN = 'eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ1In0.c2ln';

type Key = Awaited<ReturnType<typeof dpopKey>>;
let victim: Key;
let holder: Key;
beforeAll(async () => {
  victim = await dpopKey();
  holder = await dpopKey();
});

const proofOf = (key: Key, header: Record<string, unknown> = {}, signer = key) =>
  dpopProof(signer, {
    method: 'GET',
    url: URL,
    accessToken: TOKEN,
    iat: NOW,
    header: { jwk: key.publicJwk, ...header },
  });
const requestOf = (key: Key) => ({
  method: 'GET',
  htu: URL,
  accessToken: TOKEN,
  boundKey: key.thumbprint,
});

/** How many of jose's full checks `work` took. */
async function fullChecksOf(work: () => Promise<unknown>): Promise<number> {
  const before = jose.fullChecks;
  await work();
  return jose.fullChecks - before;
}

describe("the keys kept by proof header (each bound token's holder is one entry)", () => {
  const newChecker = () =>
    createProofChecker({
      algorithms: ['ES256'],
      maxAgeSeconds: 60,
      aheadSeconds: 5,
      maxCachedKeys: 4,
      clock,
    });

  it("keeps one header per key and algorithm: a holder's many spellings push no other key out", async () => {
    const check = newChecker();
    await check(await proofOf(victim), requestOf(victim));
    expect(await fullChecksOf(async () => check(await proofOf(victim), requestOf(victim)))).toBe(0);
    // One token's holder signs proofs whose headers differ only by a member of their own.
    for (let i = 0; i < 8; i++) {
      await check(await proofOf(holder, { n: i }), requestOf(holder));
    }
    // Its latest header is the one kept for its key...
    const latest = await proofOf(holder, { n: 7 });
    expect(await fullChecksOf(() => check(latest, requestOf(holder)))).toBe(0);
    // ...and the other client's key is still known.
    expect(await fullChecksOf(async () => check(await proofOf(victim), requestOf(victim)))).toBe(0);
  });

  it('keeps no header whose proof did not verify: a token without its key pushes no key out', async () => {
    const check = newChecker();
    await check(await proofOf(victim), requestOf(victim));
    // The holder's public key and token, signed by another key: each proof refused.
    const stranger = await dpopKey();
    for (let i = 0; i < 8; i++) {
      const forged = await proofOf(holder, { n: i }, stranger);
      await expect(check(forged, requestOf(holder))).rejects.toMatchObject({ reason: 'bad_proof' });
    }
    expect(await fullChecksOf(async () => check(await proofOf(victim), requestOf(victim)))).toBe(0);
  });
});
