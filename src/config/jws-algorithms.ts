/**
 * The JWS algorithms the gateway verifies: asymmetric only, so `none` and HMAC (which a public
 * key could "sign") never pass. Keycloak's access tokens and DPoP proofs (`DPOP_ALGORITHMS`, a
 * subset of these) are read with them.
 */
export const ASYMMETRIC_ALGORITHMS = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
] as const;

export type AsymmetricAlgorithm = (typeof ASYMMETRIC_ALGORITHMS)[number];
