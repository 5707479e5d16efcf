import type { Response } from 'express';

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
  /** Token issue time, epoch seconds. */
  issuedAt: number;
  /** Token expiry, epoch seconds. */
  expiresAt: number;
}

/** The principal the auth middleware stored for this request. */
export function principalOf(res: Response): Principal {
  const principal = res.locals.principal as Principal | undefined;
  if (!principal) throw new Error('principalOf called on a route without authentication');
  return principal;
}

/** Builds a principal from verified access-token claims. */
export function principalFromClaims(
  realm: string,
  claims: Record<string, unknown>,
  method: Principal['method'],
): Principal {
  const realmAccess = claims.realm_access as { roles?: unknown } | undefined;
  const resourceAccess = (claims.resource_access ?? {}) as Record<string, { roles?: unknown }>;
  const clientRoles: Record<string, string[]> = {};
  for (const [client, access] of Object.entries(resourceAccess)) {
    clientRoles[client] = stringsOf(access?.roles);
  }
  return {
    realm,
    userId: typeof claims.sub === 'string' ? claims.sub : '',
    username: typeof claims.preferred_username === 'string' ? claims.preferred_username : '',
    realmRoles: stringsOf(realmAccess?.roles),
    clientRoles,
    locale: typeof claims.locale === 'string' ? claims.locale : undefined,
    method,
    sessionId: typeof claims.sid === 'string' ? claims.sid : undefined,
    issuedAt: Number(claims.iat),
    expiresAt: Number(claims.exp),
  };
}

function stringsOf(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}
