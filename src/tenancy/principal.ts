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
  /** Token issue time, epoch seconds. */
  issuedAt: number;
  /** Token expiry, epoch seconds. */
  expiresAt: number;
}
