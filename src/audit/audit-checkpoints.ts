import type { KeyObject } from 'node:crypto';
import { CompactSign, compactVerify, createLocalJWKSet, type JSONWebKeySet, type JWK } from 'jose';

/**
 * A signed checkpoint of one audit log: the gateway vouches, with a key of its own, that the
 * log's record `seq` had hash `hash`. Since every record names the hash of the one before, a
 * checkpoint fixes every record up to it: one edited, removed or added before it, or the log
 * cut short after it, no longer matches. Shared with the CLI (`realmgate audit verify`): no
 * database, no express.
 */
export interface Checkpoint {
  org: string;
  seq: number;
  /** The hash of the record `seq` of the log. */
  hash: string;
  /** ISO 8601: the time of that record (an export of a time range takes checkpoints by it). */
  recordAt: string;
  /** ISO 8601: when the checkpoint was signed. */
  at: string;
  /** The signing key's id: its RFC 7638 thumbprint. */
  kid: string;
  /** A compact JWS (EdDSA) whose payload is the fields above but `kid` and `jws`. */
  jws: string;
}

/** What a checkpoint's JWS payload holds. */
export type CheckpointClaims = Pick<Checkpoint, 'org' | 'seq' | 'hash' | 'recordAt' | 'at'>;

/** The one algorithm of checkpoints: Ed25519 (small, fast, deterministic signatures). */
export const CHECKPOINT_ALG = 'EdDSA';
/** The JWS `typ`: a checkpoint is not a token, and no token passes for one. */
export const CHECKPOINT_TYP = 'realmgate-audit-checkpoint';

/** A key that signs checkpoints: its id and a signer (the private key never leaves it). */
export interface CheckpointSigner {
  kid: string;
  /** The public key as a JWK (`kid`, `alg`, `use` set): what the gateway publishes. */
  publicJwk: JWK;
  sign(claims: CheckpointClaims): Promise<Checkpoint>;
  /** A compact JWS of `claims` with the same key, of type `typ` (another statement than a checkpoint). */
  signAs(typ: string, claims: object): Promise<string>;
}

/** A signer of checkpoints with `privateKey` (a KeyObject or CryptoKey of an Ed25519 key). */
export function checkpointSigner(
  privateKey: KeyObject,
  publicJwk: JWK & { kid: string },
): CheckpointSigner {
  const { kid } = publicJwk;
  const signAs = (typ: string, claims: object) =>
    new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
      .setProtectedHeader({ alg: CHECKPOINT_ALG, kid, typ })
      .sign(privateKey);
  return {
    kid,
    publicJwk,
    signAs,
    async sign(claims) {
      const jws = await signAs(CHECKPOINT_TYP, claimsOf(claims));
      return { ...claimsOf(claims), kid, jws };
    },
  };
}

/** The claims in a fixed order, nothing else. */
function claimsOf(c: CheckpointClaims): CheckpointClaims {
  return { org: c.org, seq: c.seq, hash: c.hash, recordAt: c.recordAt, at: c.at };
}

/**
 * Checks a checkpoint against `keys` (a JWKS): its JWS must be signed by the key its `kid`
 * names, with EdDSA and the checkpoints' `typ`, and its payload must be the fields it shows.
 * Returns why it does not verify, or undefined.
 */
export function checkpointMisfit(
  checkpoint: Checkpoint,
  keys: JSONWebKeySet,
): Promise<string | undefined> {
  return signedMisfit(checkpoint, claimsOf(checkpoint), keys, CHECKPOINT_TYP, 'a checkpoint');
}

/**
 * Checks a signed statement (`kid`, `jws`) against `keys`: its JWS must be signed by the key its
 * `kid` names, with EdDSA and the `typ` of its kind, and its payload must be `claims` exactly.
 * Returns why it does not verify, or undefined.
 */
export async function signedMisfit(
  signed: { kid: string; jws: string },
  claims: object,
  keys: JSONWebKeySet,
  typ: string,
  kind: string,
): Promise<string | undefined> {
  let payload: Uint8Array;
  try {
    const verified = await compactVerify(signed.jws, createLocalJWKSet(keys), {
      algorithms: [CHECKPOINT_ALG],
    });
    if (verified.protectedHeader.typ !== typ) return `its JWS is not ${kind}`;
    if (verified.protectedHeader.kid !== signed.kid) return 'it names another key than its JWS';
    payload = verified.payload;
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'ERR_JWKS_NO_MATCHING_KEY') {
      return `it is signed with key ${signed.kid}, which is not among the keys`;
    }
    if (code === 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED') {
      return `its signature does not verify with key ${signed.kid}`;
    }
    return `its JWS cannot be read (${(err as Error).message})`;
  }
  let decoded: unknown;
  try {
    decoded = JSON.parse(new TextDecoder().decode(payload));
  } catch {
    return 'its JWS payload is not JSON';
  }
  if (JSON.stringify(decoded) !== JSON.stringify(claims)) {
    return 'its fields are not those its signature covers';
  }
  return undefined;
}

/**
 * The last line of a JSON Lines export: what it holds, from its first record to its last. A
 * file cut short still ends on a whole line and its chain holds, so without it a verifier
 * cannot tell a cut export from a whole one. Signed while the log is (a key of the
 * checkpoints', its own `typ`): removing records at the end and writing an end line that fits
 * them takes the key. Unsigned (the log off), it only tells an export cut by accident.
 */
export interface ExportEndClaims {
  org: string;
  /** The first and last record's numbers; null when the export holds none. */
  firstSeq: number | null;
  lastSeq: number | null;
  records: number;
  /** The last record's hash. */
  hash: string | null;
  /** ISO 8601: when the export ended. */
  at: string;
}

export type ExportEnd = ExportEndClaims & { kid?: string; jws?: string };

/** The JWS `typ` of an end line: no checkpoint or token passes for one. */
export const EXPORT_END_TYP = 'realmgate-audit-export-end';

/** The claims in a fixed order, nothing else. */
export function endClaimsOf(end: ExportEndClaims): ExportEndClaims {
  const { org, firstSeq, lastSeq, records, hash, at } = end;
  return { org, firstSeq, lastSeq, records, hash, at };
}

/** Why a signed end line does not verify with `keys`, or undefined. */
export function endMisfit(
  end: ExportEnd & { kid: string; jws: string },
  keys: JSONWebKeySet,
): Promise<string | undefined> {
  return signedMisfit(end, endClaimsOf(end), keys, EXPORT_END_TYP, 'an end line');
}
