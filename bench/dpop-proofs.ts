import {
  createPrivateKey,
  generateKeyPairSync,
  hash,
  randomBytes,
  sign,
  type JsonWebKey,
} from 'node:crypto';

/**
 * The DPoP row's proofs (RFC 9449; README.md), as a client makes them: each with a new `jti`
 * and `iat`, the `ath` of `accessToken` (none on a token request), signed ES256 by the
 * client's key (`privateJwk`, made per run) with node:crypto, the header encoded once.
 */
export interface ProofSpec {
  privateJwk: JsonWebKey;
  method: string;
  /** The URL the client addresses: the gateway's `PUBLIC_URL` and the path. */
  htu: string;
  accessToken?: string;
  /** The server's nonce (`DPoP-Nonce`), for a gateway with `DPOP_NONCE`. */
  nonce?: string;
}

/** A maker of fresh proofs for one key, request and token. */
export function proofMaker(spec: ProofSpec): () => string {
  const key = createPrivateKey({ key: spec.privateJwk, format: 'jwk' });
  const { kty, crv, x, y } = spec.privateJwk;
  const header = base64url({ typ: 'dpop+jwt', alg: 'ES256', jwk: { kty, crv, x, y } });
  const ath = spec.accessToken && hash('sha256', spec.accessToken, 'base64url');
  return () => {
    const claims = {
      jti: randomBytes(16).toString('base64url'),
      htm: spec.method,
      htu: spec.htu,
      iat: Math.floor(Date.now() / 1000),
      ...(ath ? { ath } : {}),
      ...(spec.nonce === undefined ? {} : { nonce: spec.nonce }),
    };
    const input = `${header}.${base64url(claims)}`;
    const signature = sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });
    return `${input}.${signature.toString('base64url')}`;
  };
}

/**
 * A round's proofs, each to be sent once, in order. `count` covers the round at the fastest
 * rate expected (`proofsFor`); a proof must be sent within the gateway's proof window
 * (`DPOP_PROOF_MAX_AGE_SECONDS`, 60 s by default) of its making.
 */
export function proofPool(spec: ProofSpec, count: number): string[] {
  return Array.from({ length: count }, proofMaker(spec));
}

/**
 * How many proofs a round of `seconds` needs at most: `ceilingPerSecond` is above the fastest
 * rate the gateway's Bearer row reached here (10,000-11,000 req/s), which a DPoP row does not
 * pass. A round that still runs out stops early and says so (load.ts `proofsRanOut`).
 */
export function proofsFor(seconds: number, ceilingPerSecond = PROOF_CEILING_PER_SECOND): number {
  return Math.ceil(seconds * ceilingPerSecond);
}
export const PROOF_CEILING_PER_SECOND = 12_000;

/** A new P-256 key for a DPoP client, as a JWK with its private half. */
export function newProofKey(): JsonWebKey {
  return generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' });
}

function base64url(value: object): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}
