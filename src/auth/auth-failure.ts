/**
 * Why an authentication failed, as counted by `realmgate_auth_failures_total`: a closed list,
 * so the metric's labels stay bounded whatever a client sends. The type is read from the list,
 * so the metric's labels (metrics/metrics.ts) cannot miss a reason added here.
 */
export const AUTH_FAILURE_REASONS = [
  /** No credentials, or a scheme other than Basic, Bearer and DPoP. */
  'missing',
  /** Basic credentials that cannot be read, or `Bearer` without a token. */
  'malformed',
  /** A token that is not a valid access token: syntax, signature, key, algorithm, claims. */
  'bad_token',
  'expired',
  /** A token of another realm than the path's. */
  'wrong_realm',
  /** Revoked through the gateway, or found no longer active by Keycloak. */
  'revoked',
  'wrong_password',
  'account_disabled',
  /** A two-factor user trying Basic, which cannot carry a one-time password. */
  'two_factor',
  /** An account that may never log in over Basic here (Keycloak's bootstrap administrator). */
  'account_refused',
  /** A DPoP proof missing, malformed or not for this request, key or token (RFC 9449 4.3). */
  'bad_proof',
  /** A DPoP proof whose `jti` was accepted before, on any replica. */
  'replayed_proof',
  /** An unbound token where the realm's API client requires DPoP (the organization's switch). */
  'dpop_required',
  /** A DPoP proof without the server's current nonce (`DPOP_NONCE`): answered with one. */
  'nonce_required',
  /** A DPoP proof the in-process replay store (no Redis) had no room to remember. */
  'proof_store_full',
  /** A DPoP proof of a key holding its share of that store while the store is under pressure. */
  'proof_key_share',
  /** The organization's realm no longer exists in Keycloak (deleted there): nothing to check with. */
  'realm_gone',
] as const;
export type AuthFailureReason = (typeof AUTH_FAILURE_REASONS)[number];

/** The `/api` authorization schemes. */
export type AuthScheme = 'basic' | 'bearer' | 'dpop';

/**
 * An authentication that failed for a reason worth telling the caller. The auth middleware
 * turns it into 401 `401-00002` with the right `WWW-Authenticate` challenge.
 */
export class AuthFailure extends Error {
  /** The scheme whose challenge answers it (`dpop`: also a bound token sent as Bearer). */
  readonly scheme: AuthScheme;
  readonly reason: AuthFailureReason;
  /** Safe to show the client: never echoes credentials. */
  readonly publicMessage: string;

  constructor(
    scheme: AuthScheme,
    reason: AuthFailureReason,
    publicMessage: string,
    options: { cause?: unknown } = {},
  ) {
    super(publicMessage, options);
    this.name = 'AuthFailure';
    this.scheme = scheme;
    this.reason = reason;
    this.publicMessage = publicMessage;
  }
}
