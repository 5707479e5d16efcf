/**
 * The shortest RSA modulus a DPoP key may have, in bits: jose's floor for RS* and PS*
 * signatures, which the `/api` check (dpop-proof.ts) applies; the token endpoint's step
 * (auth-proxy/dpop-proof-key-guard.ts) applies it too, so Keycloak never binds a token to a key
 * the API would refuse.
 */
export const MIN_RSA_MODULUS_BITS = 2048;

/**
 * Why a proof's public `jwk` is too weak to sign DPoP proofs here (a message safe to show the
 * client), or undefined. Only RSA keys have a length to judge: EC and OKP keys are fixed by
 * their curve, which importing the key checks. A modulus that is not base64url text is left
 * to the checks that import the key.
 */
export function weakKeyReason(jwk: { kty?: unknown; n?: unknown }): string | undefined {
  if (jwk.kty !== 'RSA' || typeof jwk.n !== 'string') return undefined;
  const bits = modulusBits(Buffer.from(jwk.n, 'base64url'));
  return bits < MIN_RSA_MODULUS_BITS ? rsaKeyTooShort(bits) : undefined;
}

/** The refusal of an RSA key of `bits` (fewer than `MIN_RSA_MODULUS_BITS`). */
export function rsaKeyTooShort(bits: number): string {
  return `The DPoP proof's RSA key has ${bits} bits; at least ${MIN_RSA_MODULUS_BITS} bits are needed.`;
}

/** The bit length of a big-endian unsigned integer (leading zero bytes not counted). */
function modulusBits(bytes: Buffer): number {
  let at = 0;
  while (at < bytes.length && bytes[at] === 0) at++;
  if (at === bytes.length) return 0;
  return (bytes.length - at - 1) * 8 + (32 - Math.clz32(bytes[at]!));
}
