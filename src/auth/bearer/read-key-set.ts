import { createPublicKey } from 'node:crypto';
import { createLocalJWKSet, type JWK, type JWTVerifyGetKey } from 'jose';
import { unexpectedAnswer } from '../../keycloak/keycloak-failures.ts';

/** A key set as jwks.ts holds it: jose's selection over it, its signature keys' kids, its JSON. */
export interface ReadKeySet {
  select: JWTVerifyGetKey;
  kids: Set<string>;
  body: string;
}

/**
 * Keycloak's answer as a key set: jose's selection over it and its signature keys' `kid`s, or
 * the failure it means.
 */
export function readKeySet(status: number, body: string): ReadKeySet {
  if (status !== 200) throw unexpectedAnswer('key set', status);
  let set: { keys?: unknown } | null;
  try {
    set = JSON.parse(body) as { keys?: unknown } | null;
  } catch {
    throw unexpectedAnswer('key set', status, 'not JSON');
  }
  const keys = set?.keys;
  if (!Array.isArray(keys)) throw unexpectedAnswer('key set', status, 'no "keys"');
  if (!keys.every((key) => typeof key === 'object' && key !== null && !Array.isArray(key))) {
    throw unexpectedAnswer('key set', status, 'not a key set');
  }
  // Only what can verify a signature: a key jose could not use (too weak, malformed) would fail
  // each token naming it with an error of its own (a 500), not a refusal; left out, it is a kid
  // the set does not hold, and its tokens are refused as signed by an unknown key.
  const usable = (keys as JWK[]).filter(isSignatureKey);
  let select: JWTVerifyGetKey;
  try {
    select = createLocalJWKSet({ keys: usable });
  } catch {
    throw unexpectedAnswer('key set', status, 'not a key set');
  }
  const kids = new Set<string>();
  for (const key of usable) if (typeof key.kid === 'string') kids.add(key.kid);
  return { body, select, kids };
}

/** The least RSA size jose verifies with (RFC 7518, 3.3); a smaller key makes it throw. */
const MIN_RSA_BITS = 2048;

/**
 * A public key for signatures (`use` `sig` or none; RSA, EC or OKP: never a symmetric `oct`
 * key, whose secret a token's signer could "know") that Node can import, an RSA one of at least
 * 2048 bits.
 */
function isSignatureKey(key: JWK): boolean {
  if (key.use !== undefined && key.use !== 'sig') return false;
  if (key.kty !== 'RSA' && key.kty !== 'EC' && key.kty !== 'OKP') return false;
  try {
    const { modulusLength } = createPublicKey({ key, format: 'jwk' }).asymmetricKeyDetails!;
    return key.kty !== 'RSA' || (modulusLength ?? 0) >= MIN_RSA_BITS;
  } catch {
    return false;
  }
}

/** A key set read from what was kept or relayed (already checked once), or undefined. */
export function tryReadKeySet(body: string): ReadKeySet | undefined {
  try {
    return readKeySet(200, body);
  } catch {
    return undefined;
  }
}
