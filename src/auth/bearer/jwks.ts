import { createRemoteJWKSet, customFetch, type JWTVerifyGetKey } from 'jose';
import type { KeycloakCalls } from '../../keycloak/keycloak-calls.ts';
import { failureOf, unexpectedAnswer } from '../../keycloak/keycloak-failures.ts';
import { createLocalKeySetMemory, type KeySetMemory } from './key-set-memory.ts';

/**
 * One remote key set per realm, fetched from Keycloak directly through the client layer (its
 * failures are the layer's 503/504/502; with several nodes it picks one, and retries on another
 * if that one cannot be reached: the URL given to jose only names the set). jose selects keys by
 * `kid` (and skips keys whose `use` is not `sig`), refetches on an unknown `kid` at most once per
 * cooldown, and merges concurrent refetches into one request.
 *
 * Each set Keycloak serves is kept in `memory`; when no Keycloak node can be reached (or none
 * answers in time), the fetch answers with the set kept last instead, so tokens signed with a
 * known key stay verifiable through an outage: after jose's cache age, and in a worker that
 * never fetched the realm's set itself (a worker's memory includes its siblings'). A bad answer
 * (e.g. no such realm) is never replaced by a kept set.
 */
export function createJwksRegistry(options: { calls: KeycloakCalls; memory?: KeySetMemory }) {
  const { calls, memory = createLocalKeySetMemory() } = options;
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
          [customFetch]: () => fetchKeySet(realm, path),
        });
        keySets.set(realm, keySet);
      }
      return keySet;
    },
    /**
     * Fetches the realm's key set anew: from its return on, only keys Keycloak publishes verify.
     * Here by dropping the realm's remote set, so the next verification fetches it.
     */
    refresh(realm: string): Promise<void> {
      keySets.delete(realm);
      return Promise.resolve();
    },
  };

  async function fetchKeySet(realm: string, path: string): Promise<Response> {
    let body: string;
    try {
      body = await calls.exchange('jwks', path, undefined, checkedKeySet);
      memory.remember(realm, body);
    } catch (err) {
      const kept = failureOf(err) === 'bad_answer' ? undefined : await memory.recall(realm);
      if (kept === undefined) throw err;
      body = kept;
    }
    return new Response(body, { status: 200, headers: { 'content-type': 'application/json' } });
  }
}

/** Keycloak's answer as a key set jose can read, or the failure it means. */
function checkedKeySet(status: number, body: string): string {
  if (status !== 200) throw unexpectedAnswer('key set', status);
  let keys: unknown;
  try {
    keys = (JSON.parse(body) as { keys?: unknown } | null)?.keys;
  } catch {
    throw unexpectedAnswer('key set', status, 'not JSON');
  }
  if (!Array.isArray(keys)) throw unexpectedAnswer('key set', status, 'no "keys"');
  return body;
}

export type JwksRegistry = ReturnType<typeof createJwksRegistry>;
