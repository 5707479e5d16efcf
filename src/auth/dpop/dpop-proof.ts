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
import { weakKeyReason } from './dpop-key-strength.ts';

/**
 * A proof is a few hundred bytes (an RSA-4096 key and signature about 2.3 KiB): anything longer
 * is refused before it is decoded.
 */
const MAX_PROOF_LENGTH = 8 * 1024;
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
  /**
   * On this clock, a moment past the last one any replica may still take this proof (its `iat`
   * inside the window of a replica whose clock is up to the ahead allowance behind, whatever
   * this one's): its replay entry lives so long.
   */
  acceptableUntil: number;
  /** Its `nonce` claim, if any (RFC 9449 section 9; checked by the scheme when nonces are on). */
  nonce?: unknown;
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
 * `cnf.jkt` (checked before any signature, so only bound keys are kept); the signature; `jti`,
 * `htm`, `htu`, `iat` inside the window, `ath`. Whether the `jti` was seen before is the replay
 * store's question (dpop-replay.ts). A proof is never cached; an imported key is, with its
 * thumbprint, once a proof of it passed, under the text of the protected header that carried it
 * (a client's proofs all share one header: its `typ`, `alg` and `jwk`; public, and short), one
 * header per key and `alg`. A header's first proof is checked in full by jose; once one passed,
 * the next proofs of that header (already checked, their key imported for their `alg`) have
 * their signature checked by node:crypto at once, with the parameters jose uses for that `alg`,
 * no promise and no header parsing: only the comparison with the token's `cnf.jkt`, the
 * signature and the claims remain.
 */
export function createProofChecker(options: ProofCheckOptions): ProofChecker {
  const { clock = systemClock } = options;
  const algorithms = [...options.algorithms];
  const keys = new TtlLru<KnownKey>(options.maxCachedKeys, clock);
  /** The header each key is kept under, by thumbprint and `alg`. */
  const headers = new TtlLru<string>(options.maxCachedKeys, clock);

  return async (proof, request) => {
    const [headerEnd, payloadEnd] = compactJwsDots(proof);
    if (payloadEnd === 0) throw invalidProof('The DPoP proof is not a compact JWS.');
    // The header's text names its key: a client's proofs all carry the same header.
    const header = proof.slice(0, headerEnd);
    const known = keys.get(header);
    const payload =
      (known?.verifier && verifiedPayload(proof, headerEnd, payloadEnd, known, request)) ??
      (await checkedInFull(proof, header, request.boundKey));
    return checkClaims(payload, request);
  };

  /**
   * Every check of jose's on the proof; once it passed, its key kept for the next proofs of its
   * header, the one header kept for that key and `alg` (a header's text can be spelt many ways
   * by whoever holds a bound token: none of them pushes another client's key out).
   */
  async function checkedInFull(proof: string, header: string, boundKey: string) {
    let known: KnownKey | undefined;
    try {
      const { payload } = await jwtVerify(
        proof,
        async (fields) => (known = await keyOf(fields, header, boundKey)).key,
        { algorithms, currentDate: new Date(clock.now()) },
      );
      keep(header, known!);
      return payload as Record<string, unknown>;
    } catch (err) {
      throw err instanceof AuthFailure ? err : invalidProof('The DPoP proof is not valid.', err);
    }
  }

  /** `known` under `header`, in place of the header its key and `alg` were kept under before. */
  function keep(header: string, known: KnownKey): void {
    known.verifier ??= signatureCheckOf(known.alg, known.key);
    const id = `${known.thumbprint} ${known.alg}`;
    const before = headers.get(id);
    if (before !== undefined && before !== header) keys.delete(before);
    const until = clock.now() + KEY_KEPT_MS;
    headers.set(id, header, until);
    keys.set(header, known, until);
  }

  /**
   * The payload of a proof whose header passed before, once its key is the token's and its
   * signature holds; undefined when the payload has claims jose would check (`exp`, `nbf`),
   * which the full check then does. The proof is all base64url (compactJwsDots), so its text
   * is its bytes: the signed part is one latin1 copy, the payload decoded once and parsed once.
   */
  function verifiedPayload(
    proof: string,
    headerEnd: number,
    payloadEnd: number,
    known: KnownKey,
    request: ProofRequest,
  ) {
    if (!sameText(known.thumbprint, request.boundKey)) {
      throw invalidProof("The DPoP proof's key is not the key the token is bound to.");
    }
    let payload: unknown;
    try {
      const signed = Buffer.from(proof.slice(0, payloadEnd), 'latin1');
      if (!known.verifier!(signed, Buffer.from(proof.slice(payloadEnd + 1), 'base64url')))
        throw new Error('signature');
      const body = Buffer.from(proof.slice(headerEnd + 1, payloadEnd), 'base64url');
      payload = JSON.parse(body.toString('utf8'));
    } catch (err) {
      throw invalidProof('The DPoP proof is not valid.', err);
    }
    if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
      throw invalidProof('The DPoP proof is not valid.');
    }
    return 'exp' in payload || 'nbf' in payload ? undefined : (payload as Record<string, unknown>);
  }

  /** The proof's key, once its header passed, if it is the token's (kept: `keep`). */
  async function keyOf(
    fields: JWSHeaderParameters,
    header: string,
    boundKey: string,
  ): Promise<KnownKey> {
    const known = keys.get(header) ?? (await checkedKey(fields));
    if (!sameText(known.thumbprint, boundKey)) {
      throw invalidProof("The DPoP proof's key is not the key the token is bound to.");
    }
    return known;
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
    const weak = weakKeyReason(jwk);
    if (weak !== undefined) throw invalidProof(weak);
    const thumbprint = await calculateJwkThumbprint(jwk, 'sha256');
    const key = (await importJWK(jwk as JWK, header.alg)) as CryptoKey;
    return { thumbprint, key, alg: String(header.alg) };
  }

  function checkClaims(payload: Record<string, unknown>, request: ProofRequest): CheckedProof {
    const { jti, htm, htu, iat, ath, nonce } = payload;
    if (typeof jti !== 'string' || jti.length === 0 || jti.length > MAX_JTI_LENGTH) {
      throw invalidProof('The DPoP proof has no valid "jti".');
    }
    if (htm !== request.method) throw invalidProof('The DPoP proof is for another method.');
    // `request.htu` is in normalised form already (normalizedHtu leaves it as it is): a proof
    // that spells it so needs no URL parsing.
    if (typeof htu !== 'string' || (htu !== request.htu && normalizedHtu(htu) !== request.htu)) {
      // Both URLs said: a client that reached the gateway by another address than its
      // PUBLIC_URL (an internal name, 127.0.0.1) learns which one its proofs must name.
      const named = typeof htu === 'string' ? ` names ${shortened(htu)}` : ' names no URL';
      throw invalidProof(
        `The DPoP proof is for another URL: this gateway expects ${request.htu}; the proof${named}.`,
      );
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
    // Counted from now, not from `iat` on this clock: a replica whose clock runs ahead (which
    // nothing notices, proofs only look older to it) would make the entry end before the others'
    // windows do. Any replica takes the proof until at most the window and the ahead allowance
    // after its `iat` (a replica further behind would refuse fresh proofs), and an `iat` this
    // replica takes is at most the allowance ahead of now: the window and twice the allowance.
    const acceptableUntil = clock.now() + (options.maxAgeSeconds + 2 * options.aheadSeconds) * 1000;
    return nonce === undefined ? { jti, acceptableUntil } : { jti, acceptableUntil, nonce };
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
    // Converted here rather than by `dsaEncoding: 'ieee-p1363'`: node:crypto then takes the key
    // object as it is, which costs a P-256 check about 20 µs less (bench/dpop-cost.ts).
    const half = ECDSA_HALF_LENGTH[alg];
    if (half === undefined) return undefined;
    return (signed, signature) => {
      const der = derSignatureOf(signature, half);
      return der !== undefined && verify(digest, signed, keyObject, der);
    };
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

/** The length of r (and of s) in a JWS ECDSA signature (RFC 7518 section 3.4), per `alg`. */
const ECDSA_HALF_LENGTH: Record<string, number> = { ES256: 32, ES384: 48, ES512: 66 };

/**
 * A JWS ECDSA signature (r || s, each `half` bytes) as the DER `ECDSA-Sig-Value` OpenSSL reads:
 * each integer minimal, a zero byte before one whose high bit is set. Undefined when the
 * signature is not exactly 2 × `half` bytes, which WebCrypto (and so jose) refuses too.
 */
export function derSignatureOf(signature: Buffer, half: number): Buffer | undefined {
  if (signature.length !== 2 * half) return undefined;
  let r = 0;
  while (r < half - 1 && signature[r] === 0) r++;
  let s = half;
  while (s < 2 * half - 1 && signature[s] === 0) s++;
  const rPad = signature[r]! >= 0x80 ? 1 : 0;
  const sPad = signature[s]! >= 0x80 ? 1 : 0;
  const rLength = half - r + rPad;
  const sLength = 2 * half - s + sPad;
  const body = 4 + rLength + sLength;
  // ES512's sequence may pass 127 bytes: its length then takes the long form (0x81, length).
  const long = body >= 0x80 ? 1 : 0;
  const der = Buffer.allocUnsafe(2 + long + body);
  let at = 0;
  der[at++] = 0x30;
  if (long) der[at++] = 0x81;
  der[at++] = body;
  der[at++] = 0x02;
  der[at++] = rLength;
  if (rPad) der[at++] = 0;
  at += signature.copy(der, at, r, half);
  der[at++] = 0x02;
  der[at++] = sLength;
  if (sPad) der[at++] = 0;
  signature.copy(der, at, s, 2 * half);
  return der;
}

/** Three non-empty base64url parts (RFC 7515 section 7.1); `\w` is `[A-Za-z0-9_]` here. */
const COMPACT_JWS = /^[\w-]+\.[\w-]+\.[\w-]+$/;

/**
 * Where the two dots of a compact JWS are; [0, 0] when `text` is not one or is longer than a
 * proof may be. One regular expression test, which V8 compiles to machine code: about a third
 * of a loop over the text's characters in JavaScript.
 */
function compactJwsDots(text: string): [headerEnd: number, payloadEnd: number] {
  if (text.length > MAX_PROOF_LENGTH || !COMPACT_JWS.test(text)) return [0, 0];
  const headerEnd = text.indexOf('.');
  return [headerEnd, text.indexOf('.', headerEnd + 1)];
}

/** An imported key is kept this long after its import (a thumbprint names one key forever). */
const KEY_KEPT_MS = 60 * 60 * 1000;

/** Equal strings, compared in constant time (thumbprints and hashes are short, same length). */
function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * A client's text in a message (which the challenge's `error_description` repeats): at most
 * 200 characters, each outside printable ASCII as `?`.
 */
function shortened(text: string): string {
  const printable = text.slice(0, 200).replace(/[^\x20-\x7e]/g, '?');
  return text.length > 200 ? `${printable}...` : printable;
}

/** A refusal of the proof (`invalid_dpop_proof`); the message is safe to show the client. */
export function invalidProof(message: string, cause?: unknown): AuthFailure {
  return new AuthFailure('dpop', 'bad_proof', message, { cause });
}
