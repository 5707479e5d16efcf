import { createRemoteJWKSet, type JWTVerifyGetKey } from 'jose';

/**
 * One remote key set per realm, fetched from Keycloak directly. jose selects keys by `kid` (and
 * skips keys whose `use` is not `sig`), refetches on an unknown `kid` at most once per cooldown,
 * and merges concurrent refetches into one request.
 */
export function createJwksRegistry(options: { keycloakUrl: string; timeoutMs: number }) {
  const keySets = new Map<string, JWTVerifyGetKey>();
  return {
    keySetFor(realm: string): JWTVerifyGetKey {
      let keySet = keySets.get(realm);
      if (!keySet) {
        const url = new URL(
          `${options.keycloakUrl}/realms/${encodeURIComponent(realm)}/protocol/openid-connect/certs`,
        );
        keySet = createRemoteJWKSet(url, {
          timeoutDuration: options.timeoutMs,
          cooldownDuration: 10_000,
          cacheMaxAge: 10 * 60_000,
        });
        keySets.set(realm, keySet);
      }
      return keySet;
    },
  };
}

export type JwksRegistry = ReturnType<typeof createJwksRegistry>;
