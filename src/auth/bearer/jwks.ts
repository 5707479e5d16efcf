import { createRemoteJWKSet, customFetch, type JWTVerifyGetKey } from 'jose';
import type { KeycloakCalls } from '../../keycloak/keycloak-calls.ts';
import { unexpectedAnswer } from '../../keycloak/keycloak-failures.ts';

/**
 * One remote key set per realm, fetched from Keycloak directly through the client layer (its
 * failures are the layer's 503/504/502; with several nodes it picks one, and retries on another
 * if that one cannot be reached: the URL given to jose only names the set). jose selects keys by `kid` (and skips keys whose `use`
 * is not `sig`), refetches on an unknown `kid` at most once per cooldown, and merges concurrent
 * refetches into one request.
 */
export function createJwksRegistry(options: { calls: KeycloakCalls }) {
  const { calls } = options;
  const keySets = new Map<string, JWTVerifyGetKey>();
  return {
    keySetFor(realm: string): JWTVerifyGetKey {
      let keySet = keySets.get(realm);
      if (!keySet) {
        const path = `/realms/${encodeURIComponent(realm)}/protocol/openid-connect/certs`;
        keySet = createRemoteJWKSet(new URL(`${calls.keycloakUrl}${path}`), {
          // The layer enforces the timeout; jose's own would only race it.
          timeoutDuration: calls.timeoutMs + 1000,
          cooldownDuration: 10_000,
          cacheMaxAge: 10 * 60_000,
          [customFetch]: () => calls.exchange('jwks', path, undefined, keySetAnswerOf),
        });
        keySets.set(realm, keySet);
      }
      return keySet;
    },
  };
}

/** What jose reads of a fetch response, for a key set the layer has already checked. */
function keySetAnswerOf(status: number, body: string): Response {
  if (status !== 200) throw unexpectedAnswer('key set', status);
  let keys: unknown;
  try {
    keys = (JSON.parse(body) as { keys?: unknown } | null)?.keys;
  } catch {
    throw unexpectedAnswer('key set', status, 'not JSON');
  }
  if (!Array.isArray(keys)) throw unexpectedAnswer('key set', status, 'no "keys"');
  return new Response(body, { status: 200, headers: { 'content-type': 'application/json' } });
}

export type JwksRegistry = ReturnType<typeof createJwksRegistry>;
