import * as oidc from 'openid-client';
import type { KeycloakCallKind, KeycloakCalls } from './keycloak-calls.ts';
import { keycloakError, unexpectedAnswer } from './keycloak-failures.ts';
import { publicAddressHeaders } from '../outbound/forwarded-headers.ts';

/**
 * The OpenID Connect side of the gateway's own Keycloak calls: openid-client builds the requests
 * and reads the answers (the password grant, introspection); every request it makes goes through
 * the client layer (`customFetch` → `KeycloakCalls.send`: node choice, retries, timeouts, the
 * failure translation).
 *
 * A realm's metadata is not discovered: the gateway knows it. The issuer is
 * `PUBLIC_URL/auth/realms/<realm>`, pinned by Keycloak's `--hostname` and checked by the bearer
 * verifier on every token, and the endpoints are written below it, as Keycloak believes it
 * serves them: a DPoP proof's `htu` (openid-client's, from the endpoint) is what Keycloak
 * compares with its own URL. The layer sends each request to the node it picks, at the same
 * path below the node's URL (`fetchThrough`). A discovery would
 * be one more Keycloak request before the first login of each realm in each process, and one
 * more way for it to fail (see docs/performance.md).
 */

/** One client of a realm: its id and how it authenticates. */
export interface RealmClient {
  id: string;
  auth: oidc.ClientAuth;
}

/**
 * openid-client's `Configuration` of `client(realm)` on each realm, made once per realm, its
 * requests sent as calls of `kind`. `issuerOf(realm)` is the realm's issuer: what the ID token
 * of a grant must name.
 */
export function realmConfigurations(
  calls: KeycloakCalls,
  kind: KeycloakCallKind,
  issuerOf: (realm: string) => string,
  client: (realm: string) => RealmClient,
): (realm: string) => oidc.Configuration {
  const known = new Map<string, oidc.Configuration>();
  return (realm) => {
    const made = known.get(realm);
    if (made) return made;
    const issuer = issuerOf(realm);
    const endpoints = `${issuer}/protocol/openid-connect`;
    const server: oidc.ServerMetadata = {
      issuer,
      token_endpoint: `${endpoints}/token`,
      introspection_endpoint: `${endpoints}/token/introspect`,
    };
    const { id, auth } = client(realm);
    const config = new oidc.Configuration(server, id, undefined, auth);
    config[oidc.customFetch] = fetchThrough(calls, kind, issuer, `/realms/${realm}`);
    // The layer decides where requests go (KEYCLOAK_URL's nodes, http or https as configured)
    // and when they time out: no https-only check of openid-client's, and no AbortSignal timer
    // of its own per call.
    oidc.allowInsecureRequests(config);
    config.timeout = 0;
    known.set(realm, config);
    return config;
  };
}

/**
 * openid-client's fetch for calls of `kind` on one realm: the URL it asks for, below the realm's
 * `issuer` (the endpoints above are written below it), is sent by the layer to the node it
 * picks, at `realmPath` below the node's URL, with the request's `DPoP` proof when there is one.
 * The answer comes back as a `Response` for openid-client to read, except a 5xx one, which the
 * layer translates as it translates every failure (503/504/502).
 */
function fetchThrough(
  calls: KeycloakCalls,
  kind: KeycloakCallKind,
  issuer: string,
  realmPath: string,
): oidc.CustomFetch {
  const answerOf = (status: number, body: string, contentType?: string) => {
    if (status >= 500) throw unexpectedAnswer(`${kind} call`, status);
    return new Response(body, {
      status,
      headers: contentType === undefined ? undefined : { 'content-type': contentType },
    });
  };
  // A request with a proof tells Keycloak it is reached at the public address, as `/auth` does:
  // Keycloak checks the proof's `htu` against the URL it believes it serves.
  const publicAddress = pairsToRecord(publicAddressHeaders(issuer));
  return (url, options) => {
    if (!url.startsWith(`${issuer}/`)) {
      throw keycloakError('bad_answer', new Error(`not a Keycloak endpoint: ${url}`));
    }
    const proof = new Headers(options.headers).get('dpop');
    const path = realmPath + url.slice(issuer.length);
    const headers = proof ? { ...publicAddress, dpop: proof } : undefined;
    return calls.send(kind, path, formOf(options.body), answerOf, headers);
  };
}

function pairsToRecord(pairs: readonly string[]): Record<string, string> {
  const record: Record<string, string> = {};
  for (let i = 0; i < pairs.length; i += 2) record[pairs[i]!] = pairs[i + 1]!;
  return record;
}

/** openid-client sends its forms as URLSearchParams. */
function formOf(body: oidc.FetchBody): string | undefined {
  if (body === undefined || body === null) return undefined;
  if (body instanceof URLSearchParams || typeof body === 'string') return body.toString();
  throw new TypeError('unexpected request body');
}
