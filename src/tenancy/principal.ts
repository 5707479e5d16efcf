/** Who is calling, as established by Basic or Bearer authentication. */
export interface Principal {
  realm: string;
  userId: string;
  username: string;
  realmRoles: string[];
  /** Client roles by client id, e.g. `{ "<org>-workspaces": ["ws1"] }`. */
  clientRoles: Record<string, string[]>;
  locale: string | undefined;
  method: 'basic' | 'bearer';
  /** Keycloak session id (`sid`), when the token has one. */
  sessionId: string | undefined;
  /** The client the token was issued to (`azp`), when it names one. */
  clientId?: string;
  /** The token's own id (`jti`), when it has one: what RFC 7009 revocation of it refuses. */
  tokenId?: string;
  /**
   * The RFC 7638 thumbprint of the key the token is bound to (`cnf.jkt`, RFC 9449), when it is:
   * such a token is served only with the DPoP scheme and a proof of that key.
   */
  boundKey?: string;
  /** Token issue time, epoch seconds. */
  issuedAt: number;
  /** Token expiry, epoch seconds. */
  expiresAt: number;
  /**
   * What the token's session was narrowed to at issuance (auth/reach.ts), when it was; absent,
   * the token may do whatever its user may.
   */
  reach?: TokenReach;
}

/**
 * What a refresh token given a narrower reach at issuance may do (docs/tokens-and-cli.md, "Job
 * credentials"). The same for every access token of its session.
 */
export interface TokenReach {
  /** The workspaces it may reach; undefined: every workspace its user holds. */
  readonly workspaces: readonly string[] | undefined;
  /** Safe methods only (GET, HEAD, OPTIONS). */
  readonly readOnly: boolean;
  /** Epoch ms after which the session is over for the gateway; undefined: Keycloak's expiry. */
  readonly expiresAt: number | undefined;
  /** The name given at issuance (a job credential's), when one was: for the audit log. */
  readonly name?: string | undefined;
  /**
   * The realm the session is of, as recorded at issuance (not read from a token): the audit log
   * records a refusal of its token there, whatever realm the request's path names, once the
   * token verifies against that realm's keys.
   */
  readonly realm?: string | undefined;
}
