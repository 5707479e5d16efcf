import { revokeRealmWide, revokeUsers, type RevocationList } from '../auth/revocation.ts';
import type { KeycloakAdmin } from '../keycloak/admin-client.ts';
import { longestAccessTokenSeconds } from './realm-admin/users.ts';

/**
 * Refuses, on every replica, the listed users' access tokens issued before now and drops their
 * cached Basic logins: what they held (an account, a workspace role) changed, and a token
 * must not keep it until it expires. The refusal lasts as long as the realm's longest access
 * token can live; the next refresh or Basic login reflects Keycloak as it is now.
 */
export type RefuseTokens = (
  admin: KeycloakAdmin,
  realm: string,
  userIds: readonly string[],
) => Promise<void>;

export function createTokenRefusal(deps: {
  revocations: RevocationList;
  basicCacheSeconds: number;
  leewaySeconds: number;
}): RefuseTokens {
  return async (admin, realm, userIds) => {
    if (userIds.length === 0) return;
    const tokenTtlSeconds = (await longestAccessTokenSeconds(admin, realm)) + deps.leewaySeconds;
    const bounds = { tokenTtlSeconds, basicSeconds: deps.basicCacheSeconds };
    for (const userId of userIds) {
      await revokeUsers(deps.revocations, realm, { userId }, bounds);
    }
  };
}

/**
 * Refuses, on every replica, every access token of the realm issued before now that carries one
 * of `roles` (`client`: the client id), and the cached Basic logins that do: the roles are
 * deleted, and whoever held them (directly, through a group, a composite) must not keep them
 * until the token expires. Their holders are not read: each token names its roles (revocation.ts,
 * `endedRoles`). The refusal lasts as long as the realm's longest access token can live.
 */
export type RefuseRoleTokens = (
  admin: KeycloakAdmin,
  realm: string,
  roles: readonly { client?: string; name: string }[],
) => Promise<void>;

export function createRoleTokenRefusal(deps: {
  revocations: RevocationList;
  basicCacheSeconds: number;
  leewaySeconds: number;
}): RefuseRoleTokens {
  return async (admin, realm, roles) => {
    if (roles.length === 0) return;
    const tokenTtlSeconds = (await longestAccessTokenSeconds(admin, realm)) + deps.leewaySeconds;
    await revokeRealmWide(
      deps.revocations,
      realm,
      { endedRoles: [...roles] },
      { tokenTtlSeconds, basicSeconds: deps.basicCacheSeconds },
    );
  };
}

/**
 * Refuses, on every replica, every access token the organization's realm issued before now and
 * drops every cached Basic login of it: the realm is deleted, and a realm created again under its
 * name (same issuer, same usernames maybe) must accept nothing the old one issued or verified.
 * `accessTokenSeconds`: the longest an access token of the deleted realm can live.
 */
export type RefuseRealmTokens = (realm: string, accessTokenSeconds: number) => Promise<void>;

export function createRealmTokenRefusal(deps: {
  revocations: RevocationList;
  basicCacheSeconds: number;
  leewaySeconds: number;
}): RefuseRealmTokens {
  return (realm, accessTokenSeconds) =>
    revokeRealmWide(
      deps.revocations,
      realm,
      { wholeRealm: true },
      {
        tokenTtlSeconds: accessTokenSeconds + deps.leewaySeconds,
        basicSeconds: deps.basicCacheSeconds,
      },
    );
}

/**
 * Remembers, on every replica, that the realm's access tokens issued until now may live
 * `accessTokenSeconds` (the realm's longest, read before an administrator changes its
 * lifetimes): a refusal made after the lifetime was shortened still lasts as long as a token
 * issued before, whether a replica served one or not.
 */
export type KeepFormerLifetime = (realm: string, accessTokenSeconds: number) => Promise<void>;

export function createFormerLifetimeKeeping(deps: {
  revocations: Pick<RevocationList, 'rememberFormerLifetime'>;
  leewaySeconds: number;
}): KeepFormerLifetime {
  return (realm, accessTokenSeconds) =>
    deps.revocations.rememberFormerLifetime(realm, accessTokenSeconds + deps.leewaySeconds);
}
