import { createPublicKey, hash, verify } from 'node:crypto';
import { createProofChecker, derSignatureOf } from '../src/auth/dpop/dpop-proof.ts';
import { htuBaseOf } from '../src/auth/dpop/dpop-htu.ts';
import { ASYMMETRIC_ALGORITHMS } from '../src/config/jws-algorithms.ts';
import { newProofKey, proofPool } from './dpop-proofs.ts';

/**
 * The CPU a DPoP proof check costs, the function alone (dpop-proof.ts `createProofChecker`),
 * beside the P-256 signature check it cannot avoid (node:crypto `verify` of the same proofs
 * with one cached key object): µs of this process's CPU per proof, over proofs signed before
 * the timing (as the bench's row sends them: one key, new `jti` and `iat` each, ES256), each
 * checked once. Run pinned to one CPU, on a machine as quiet as it gets:
 *
 *     taskset -c 1 node bench/dpop-check.ts [--proofs 4000] [--rounds 7]
 *
 * Prints one line per round and the medians; `openssl speed -seconds 3 ecdsap256` gives the
 * C floor of the verify on the same CPU.
 */

const args = process.argv.slice(2);
const option = (name: string, fallback: number) => {
  const at = args.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(args[at + 1]);
};
const PROOFS = option('proofs', 4000);
const ROUNDS = option('rounds', 7);

const PUBLIC_URL = 'http://127.0.0.1:28000';
const PATH = '/api/bench/workspaces/ws1/ita/menu/operation_list/filter/';
const TOKEN = `eyJhbGciOiJSUzI1NiJ9.${'e'.repeat(900)}.${'s'.repeat(342)}`;

const privateJwk = newProofKey();
const { kty, crv, x, y } = privateJwk;
const publicKey = createPublicKey({ key: { kty, crv, x, y }, format: 'jwk' });
const thumbprint = hash('sha256', JSON.stringify({ crv, kty, x, y }), 'base64url');
const request = {
  method: 'POST',
  htu: htuBaseOf(PUBLIC_URL) + PATH,
  accessToken: TOKEN,
  accessTokenHash: hash('sha256', TOKEN, 'base64url'),
  boundKey: thumbprint,
};
const check = createProofChecker({
  algorithms: ASYMMETRIC_ALGORITHMS,
  maxAgeSeconds: 300,
  aheadSeconds: 5,
  maxCachedKeys: 100,
});
const spec = { privateJwk, method: 'POST', htu: `${PUBLIC_URL}${PATH}`, accessToken: TOKEN };

/** µs of CPU (user + system) per proof for `work` over `proofs`. */
async function cpuPerProof(proofs: string[], work: (proof: string) => unknown): Promise<number> {
  const before = process.cpuUsage();
  for (const proof of proofs) await work(proof);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / proofs.length;
}

/**
 * The signature check alone, the cheapest way node:crypto offers: what any proof check must
 * spend. (With `{ key, dsaEncoding: 'ieee-p1363' }` instead of the DER form, about 20 µs more.)
 */
function signatureOnly(proof: string): boolean {
  const cut = proof.lastIndexOf('.');
  const signed = Buffer.from(proof.slice(0, cut), 'latin1');
  const der = derSignatureOf(Buffer.from(proof.slice(cut + 1), 'base64url'), 32)!;
  return verify('sha256', signed, publicKey, der);
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1]!;

// A first proof goes through the full check (and warms the code paths).
for (const proof of proofPool(spec, 200)) await check(proof, request);

const checks: number[] = [];
const verifies: number[] = [];
for (let round = 0; round < ROUNDS; round++) {
  const proofs = proofPool(spec, PROOFS);
  // Alternating, so a change of the machine's load meets both.
  const order = round % 2 === 0 ? (['check', 'verify'] as const) : (['verify', 'check'] as const);
  const timed: Record<string, number> = {};
  for (const what of order) {
    timed[what] = await cpuPerProof(proofs, (proof) =>
      what === 'check' ? check(proof, request) : signatureOnly(proof),
    );
  }
  checks.push(timed.check!);
  verifies.push(timed.verify!);
  console.log(
    `round ${round + 1}: check ${timed.check!.toFixed(1)} µs/proof, ` +
      `verify alone ${timed.verify!.toFixed(1)} µs/proof`,
  );
}
const [checkMedian, verifyMedian] = [median(checks), median(verifies)];
console.log(
  `median of ${ROUNDS} rounds of ${PROOFS} proofs: check ${checkMedian.toFixed(1)} µs/proof, ` +
    `verify alone ${verifyMedian.toFixed(1)}, the rest ${(checkMedian - verifyMedian).toFixed(1)}`,
);
