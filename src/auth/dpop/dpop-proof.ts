import { constants, hash, KeyObject, timingSafeEqual, verify } from 'node:crypto';
import {
  calculateJwkThumbprint,
  importJWK,
  jwtVerify,
  type CryptoKey,
  type JWK,
  type JWSHeaderParameters,
} from 'jose';
import { TtlLru } from '../../cache/ttl-lru.ts';
import { systemClock, type Clock } from '../../time/clock.ts';
import { AuthFailure } from '../auth-failure.ts';
import { normalizedHtu } from './dpop-htu.ts';

/**
 * A proof is a few hundred bytes (an RSA-4096 key and signature about 2.3 KiB): anything longer
 * is refused before it is decoded.
 */
const MAX_PROOF_LENGTH = 8 * 1024;
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const MAX_JTI_LENGTH = 512;

/** Key types of the asymmetric algorithms; `oct` (HMAC) never passes. */
const PUBLIC_KEY_TYPES = new Set(['EC', 'RSA', 'OKP']);
/** JWK members of a private (or symmetric) key: a proof carrying one is refused (RFC 9449 4.3). */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const;

/** The request a proof must speak for. */
export interface ProofRequest {
  /** The request's method, as received. */
  method: string;
  /** The URL the client addressed, normalised (`htuBaseOf` + the edge's path). */
  htu: string;
  /** The access token the request carries: the proof's `ath` is its SHA-256. */
  accessToken: string;
  /** That SHA-256 (base64url), when the caller has it already (the verifier's cache key). */
  accessTokenHash?: string;
  /** The token's `cnf.jkt`: the proof's key must have this RFC 7638 thumbprint. */
  boundKey: string;
}

/** What a valid proof establishes: its id and how long it must be remembered (epoch ms). */
export interface CheckedProof {
  jti: string;
  /** The last moment this proof's `iat` is still inside the window: its replay entry lives so long. */
  acceptableUntil: number;
}

export interface ProofCheckOptions {
  /** The asymmetric algorithms a proof may use (`DPOP_ALGORITHMS`). */
  algorithms: readonly string[];
  /** How old a proof's `iat` may be, seconds (`DPOP_PROOF_MAX_AGE_SECONDS`). */
  maxAgeSeconds: number;
  /** How far ahead of this clock a proof's `iat` may be, seconds (clients' clocks run ahead). */
  aheadSeconds: number;
  /** Bound of the imported keys kept by thumbprint. */
  maxCachedKeys: number;
  clock?: Clock;
}

/** Checks one proof; rejects with AuthFailure(`dpop`, `bad_proof`) and the reason. */
export type ProofChecker = (proof: string, request: ProofRequest) => Promise<CheckedProof>;

/**
 * The checks of RFC 9449 section 4.3 on a proof: compact syntax and size; `typ` `dpop+jwt`;
 * `alg` among `algorithms` (asymmetric only); a public `jwk` whose thumbprint is the token's
 * `cnf.jkt` (checked before any signature, so only bound keys are imported and kept); the
 * signature; `jti`, `htm`, `htu`, `iat` inside the window, `ath`. Whether the `jti` was seen
 * before is the replay store's question (dpop-replay.ts). A proof is never cached; an imported
 * key is, with its thumbprint, under the SHA-256 of the protected header that carried it (a
 * client's proofs all share one header: its `typ`, `alg` and `jwk`). A header's first proof is
 * checked in full by jose; once one passed, the next proofs of that header (already checked,
 * their key imported for their `alg`) have their signature checked by node:crypto at once, with
 * the parameters jose uses for that `alg`, no promise and no header parsing: only the
 * comparison with the token's `cnf.jkt`, the signature and the claims remain.
 */
export function createProofChecker(options: ProofCheckOptions): ProofChecker {
  const { clock = systemClock } = options;
  const algorithms = [...options.algorithms];
  const keys = new TtlLru<KnownKey>(options.maxCachedKeys, clock);

  return async (proof, request) => {
    if (proof.length > MAX_PROOF_LENGTH || !COMPACT_JWS.test(proof)) {
      throw invalidProof('The DPoP proof is not a compact JWS.');
    }
    const name = hash('sha256', proof.slice(0, proof.indexOf('.')), 'base64url');
    const known = keys.get(name);
    const payload =
      (known?.verifier && verifiedPayload(proof, known, request.boundKey)) ??
      (await checkedInFull(proof, name, request.boundKey));
    return checkClaims(payload, request);
  };

  /** Every check of jose's on the proof, and its key kept for the next proofs of its header. */
  async function checkedInFull(proof: string, name: string, boundKey: string) {
    try {
      const { payload } = await jwtVerify(proof, (header) => keyOf(header, name, boundKey), {
        algorithms,
        currentDate: new Date(clock.now()),
      });
      const known = keys.get(name);
      if (known && !known.verifier) known.verifier = signatureCheckOf(known.alg, known.key);
      return payload as Record<string, unknown>;
    } catch (err) {
      throw err instanceof AuthFailure ? err : invalidProof('The DPoP proof is not valid.', err);
    }
  }

  /**
   * The payload of a proof whose header passed before, once its key is the token's and its
   * signature holds; undefined when the payload has claims jose would check (`exp`, `nbf`),
   * which the full check then does.
   */
  function verifiedPayload(proof: string, known: KnownKey, boundKey: string) {
    if (!sameText(known.thumbprint, boundKey)) {
      throw invalidProof("The DPoP proof's key is not the key the token is bound to.");
    }
    const [header, body, signature] = proof.split('.') as [string, string, string];
    let payload: unknown;
    try {
      const signed = Buffer.from(`${header}.${body}`);
      if (!known.verifier!(signed, Buffer.from(signature, 'base64url')))
        throw new Error('signature');
      payload = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
    } catch (err) {
      throw invalidProof('The DPoP proof is not valid.', err);
    }
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
      throw invalidProof('The DPoP proof is not valid.');
    }
    return 'exp' in payload || 'nbf' in payload ? undefined : (payload as Record<string, unknown>);
  }

  /** The proof's key, once its header passed, if it is the token's; imported once per header. */
  async function keyOf(
    header: JWSHeaderParameters,
    name: string,
    boundKey: string,
  ): Promise<CryptoKey> {
    const known = keys.get(name) ?? (await checkedKey(header));
    if (!sameText(known.thumbprint, boundKey)) {
      throw invalidProof("The DPoP proof's key is not the key the token is bound to.");
    }
    // Kept only once it is a bound token's key: no stranger's key takes a place.
    keys.set(name, known, clock.now() + KEY_KEPT_MS);
    return known.key;
  }

  /** A header's key and its thumbprint, once `typ` and a public `jwk` passed. */
  async function checkedKey(header: JWSHeaderParameters): Promise<KnownKey> {
    if (header.typ !== 'dpop+jwt') throw invalidProof('The DPoP proof\'s "typ" is not dpop+jwt.');
    const jwk = header.jwk;
    if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) {
      throw invalidProof('The DPoP proof carries no "jwk".');
    }
    if (typeof jwk.kty !== 'string' || !PUBLIC_KEY_TYPES.has(jwk.kty)) {
      throw invalidProof('The DPoP proof\'s "jwk" is not an asymmetric public key.');
    }
    if (PRIVATE_MEMBERS.some((member) => Object.hasOwn(jwk, member))) {
      throw invalidProof('The DPoP proof\'s "jwk" holds a private key.');
    }
    const thumbprint = await calculateJwkThumbprint(jwk, 'sha256');
    const key = (await importJWK(jwk as JWK, header.alg)) as CryptoKey;
    return { thumbprint, key, alg: String(header.alg) };
  }

  function checkClaims(payload: Record<string, unknown>, request: ProofRequest): CheckedProof {
    const { jti, htm, htu, iat, ath } = payload;
    if (typeof jti !== 'string' || jti.length === 0 || jti.length > MAX_JTI_LENGTH) {
      throw invalidProof('The DPoP proof has no valid "jti".');
    }
    if (htm !== request.method) throw invalidProof('The DPoP proof is for another method.');
    if (typeof htu !== 'string' || normalizedHtu(htu) !== request.htu) {
      throw invalidProof('The DPoP proof is for another URL.');
    }
    if (typeof iat !== 'number' || !Number.isFinite(iat)) {
      throw invalidProof('The DPoP proof has no valid "iat".');
    }
    const now = clock.now() / 1000;
    if (iat < now - options.maxAgeSeconds) throw invalidProof('The DPoP proof is too old.');
    if (iat > now + options.aheadSeconds) {
      throw invalidProof('The DPoP proof is issued in the future.');
    }
    const tokenHash = request.accessTokenHash ?? hash('sha256', request.accessToken, 'base64url');
    if (typeof ath !== 'string' || !sameText(ath, tokenHash)) {
      throw invalidProof('The DPoP proof is not for this access token ("ath").');
    }
    return { jti, acceptableUntil: Math.ceil((iat + options.maxAgeSeconds) * 1000) };
  }
}

/**
 * A proof header's imported key, the key's RFC 7638 thumbprint and the header's `alg`; once a
 * proof of the header passed jose's full check, the signature check of its next proofs.
 */
interface KnownKey {
  thumbprint: string;
  key: CryptoKey;
  alg: string;
  verifier?: (signed: Buffer, signature: Buffer) => boolean;
}

/**
 * The signature check of `alg` with `key`, as WebCrypto does it for jose: ECDSA signatures as
 * r || s (IEEE P1363), RSA-PSS with a salt as long as the hash, EdDSA without a separate hash.
 */
function signatureCheckOf(alg: string, key: CryptoKey): KnownKey['verifier'] {
  const keyObject = KeyObject.from(key);
  const digest = `sha${alg.slice(2)}`;
  if (alg === 'EdDSA' || alg === 'Ed25519') {
    return (signed, signature) => verify(undefined, signed, keyObject, signature);
  }
  if (alg.startsWith('ES')) {
    const ecdsa = { key: keyObject, dsaEncoding: 'ieee-p1363' } as const;
    return (signed, signature) => verify(digest, signed, ecdsa, signature);
  }
  if (alg.startsWith('PS')) {
    const saltLength = Number(alg.slice(2)) / 8;
    const pss = { key: keyObject, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength };
    return (signed, signature) => verify(digest, signed, pss, signature);
  }
  if (alg.startsWith('RS')) {
    return (signed, signature) => verify(digest, signed, keyObject, signature);
  }
  return undefined;
}

/** An imported key is kept this long after its import (a thumbprint names one key forever). */
const KEY_KEPT_MS = 60 * 60 * 1000;

/** Equal strings, compared in constant time (thumbprints and hashes are short, same length). */
function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** A refusal of the proof (`invalid_dpop_proof`); the message is safe to show the client. */
export function invalidProof(message: string, cause?: unknown): AuthFailure {
  return new AuthFailure('dpop', 'bad_proof', message, { cause });
}
