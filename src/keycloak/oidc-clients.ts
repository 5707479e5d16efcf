import * as oidc from 'openid-client';
import type { KeycloakCallKind, KeycloakCalls } from './keycloak-calls.ts';
import { keycloakError, unexpectedAnswer } from './keycloak-failures.ts';

/**
 * The OpenID Connect side of the gateway's own Keycloak calls: openid-client builds the requests
 * and reads the answers (grants, introspection, discovery); every request it makes goes through
 * the client layer (`customFetch` → `KeycloakCalls.send`: node choice, retries, timeouts, the
 * failure translation), never to the URL it names itself.
 */

/** Keycloak's metadata of a realm (its discovery document), fetched once per realm and process. */
export type RealmMetadata = (realm: string) => Promise<oidc.ServerMetadata>;

/** The client id discovery is made with; it is not sent (discovery is a plain GET). */
const DISCOVERY_CLIENT = 'realmgate-discovery';

/**
 * Discovery of each realm through the layer, remembered: a realm's endpoints do not change
 * while it exists. A failed discovery is forgotten, so the next call tries again. It is fetched
 * from the node's own URL, `.well-known` named in full: openid-client then does not compare the
 * issuer with that URL (Keycloak's issuer is `PUBLIC_URL/auth/realms/<realm>`, which the bearer
 * verifier checks on every token, those of Basic logins included).
 */
export function createRealmMetadata(calls: KeycloakCalls): RealmMetadata {
  const known = new Map<string, Promise<oidc.ServerMetadata>>();
  const fetch = fetchThrough(calls, 'discovery', []);
  const discover = async (realm: string) => {
    const url = new URL(
      `${calls.keycloakUrl}/realms/${encodeURIComponent(realm)}/.well-known/openid-configuration`,
    );
    const config = await calls.call('discovery', () =>
      oidc.discovery(url, DISCOVERY_CLIENT, undefined, oidc.None(), {
        [oidc.customFetch]: fetch,
        execute: [oidc.allowInsecureRequests],
      }),
    );
    return config.serverMetadata();
  };
  return (realm) => {
    let metadata = known.get(realm);
    if (metadata === undefined) {
      metadata = discover(realm);
      known.set(realm, metadata);
      metadata.catch(() => known.delete(realm));
    }
    return metadata;
  };
}

/** One client of a realm: its id and how it authenticates. */
export interface RealmClient {
  id: string;
  auth: oidc.ClientAuth;
}

/**
 * openid-client's `Configuration` of `client(realm)` on each realm, made once per realm from its
 * metadata, its requests sent as calls of `kind`.
 */
export function realmConfigurations(
  calls: KeycloakCalls,
  kind: KeycloakCallKind,
  metadata: RealmMetadata,
  client: (realm: string) => RealmClient,
): (realm: string) => Promise<oidc.Configuration> {
  const known = new Map<string, oidc.Configuration>();
  return async (realm) => {
    const made = known.get(realm);
    if (made) return made;
    const server = await metadata(realm);
    const { id, auth } = client(realm);
    const config = new oidc.Configuration(server, id, undefined, auth);
    config[oidc.customFetch] = fetchThrough(calls, kind, [issuerBaseOf(server.issuer)]);
    // The layer decides where requests go (KEYCLOAK_URL's nodes, http or https as configured)
    // and when they time out: no https-only check on the URLs the metadata names, and no
    // AbortSignal timer of openid-client's own per call.
    oidc.allowInsecureRequests(config);
    config.timeout = 0;
    known.set(realm, config);
    return config;
  };
}

/**
 * `issuer` without its `/realms/<realm>`: Keycloak's public base URL, under which the metadata
 * may name its endpoints (as Keycloak does without `--hostname-backchannel-dynamic`).
 */
function issuerBaseOf(issuer: string): string {
  const at = issuer.lastIndexOf('/realms/');
  return at > 0 ? issuer.slice(0, at) : issuer;
}

/**
 * openid-client's fetch for calls of `kind`: the URL it asks for is read as a path below one of
 * Keycloak's base URLs (the nodes', or `bases`), and sent by the layer to the node it picks. A URL
 * outside them is refused (502): no form with a password or secret goes where the metadata
 * points. The answer comes back as a `Response` for openid-client to read, except a 5xx one,
 * which the layer translates as it translates every failure (503/504/502).
 */
function fetchThrough(
  calls: KeycloakCalls,
  kind: KeycloakCallKind,
  bases: readonly string[],
): oidc.CustomFetch {
  const known = [...calls.nodes.all.map((node) => node.url), ...bases];
  const answerOf = (status: number, body: string, contentType?: string) => {
    if (status >= 500) throw unexpectedAnswer(`${kind} call`, status);
    return new Response(body, {
      status,
      headers: contentType === undefined ? undefined : { 'content-type': contentType },
    });
  };
  return (url, options) => calls.send(kind, pathBelow(url, known), formOf(options.body), answerOf);
}

function pathBelow(url: string, bases: readonly string[]): string {
  for (const base of bases) {
    if (url.startsWith(`${base}/`)) return url.slice(base.length);
  }
  throw keycloakError('bad_answer', new Error(`an endpoint outside Keycloak's URLs: ${url}`));
}

/** openid-client sends its forms as URLSearchParams, and nothing with a GET. */
function formOf(body: oidc.FetchBody): string | undefined {
  if (body === undefined || body === null) return undefined;
  if (body instanceof URLSearchParams || typeof body === 'string') return body.toString();
  throw new TypeError('unexpected request body');
}
