import { decodeJwt } from 'jose';
import * as oidc from 'openid-client';
import { apiClientIdOf } from '../tenancy/identifiers.ts';
import { checkLearnt } from './address-check.ts';
import { isTokenForm, printable } from './client.ts';
import { DPOP_ALGORITHM, type DpopKey } from './dpop.ts';
import { CliError } from './errors.ts';
import {
  gatewayFetchOf,
  objectOf,
  unusableAnswer,
  type Answer,
  type TokenRequestTarget,
} from './token-fetch.ts';

/** What a successful grant gives the CLI. */
export interface Tokens {
  accessToken: string;
  /** Seconds. */
  expiresIn: number;
  refreshToken?: string;
  /** Seconds; 0 or absent when Keycloak sets no limit. */
  refreshExpiresIn?: number;
  /** `token_type` DPoP: bound to the key whose proof the grant carried. */
  bound: boolean;
}

/** A grant's outcome: tokens, or Keycloak's refusal (`invalid_grant` and the like). */
export type GrantResult =
  | { ok: true; tokens: Tokens }
  | {
      ok: false;
      error: string;
      description: string;
      /** The URL the refused request's proof named (`htu`), when it carried one. */
      proofUrl?: string;
    };

/**
 * The password grant of spec 4.1 through the gateway's `/auth/` (offline_access: the refresh
 * token is an offline token, listed and revoked by the refresh-token endpoints).
 */
export function passwordGrant(
  baseUrl: URL,
  login: {
    realm: string;
    username: string;
    password: string;
    totp?: string;
    /** The gateway's own fields (a name, a reach: `realmgate_*`). */
    fields?: Record<string, string>;
    /** The key the tokens are bound to (a proof on the request); none: bearer tokens. */
    dpopKey?: DpopKey;
    /** The gateway's address REALMGATE_CANONICAL_URL names, which the proof must be under. */
    pinned?: string;
  },
  timeoutMs: number,
): Promise<GrantResult> {
  const { dpopKey, pinned } = login;
  return tokenRequest({ baseUrl, realm: login.realm, timeoutMs, dpopKey, pinned }, (config) =>
    oidc.genericGrantRequest(config, 'password', {
      scope: 'openid offline_access',
      username: login.username,
      password: login.password,
      ...(login.totp === undefined ? {} : { totp: login.totp }),
      ...login.fields,
    }),
  );
}

/**
 * The refresh grant of spec 4.1 through the gateway's `/auth/`, with a proof of `dpopKey` when
 * the refresh token is bound to it (Keycloak refuses a bound one without), naming a token
 * endpoint under `pinned`, the gateway's address the login was made with.
 */
export function refreshGrant(
  baseUrl: URL,
  realm: string,
  refreshToken: string,
  timeoutMs: number,
  dpopKey?: DpopKey,
  pinned?: string,
): Promise<GrantResult> {
  return tokenRequest({ baseUrl, realm, timeoutMs, dpopKey, pinned }, (config) =>
    oidc.refreshTokenGrant(config, refreshToken),
  );
}

/**
 * Whether the realm offers DPoP with the CLI's algorithm: its discovery document (through the
 * gateway) lists it in `dpop_signing_alg_values_supported`.
 */
export async function realmOffersDpop(
  baseUrl: URL,
  realm: string,
  timeoutMs: number,
): Promise<boolean> {
  const { dpop_signing_alg_values_supported: algs } = await discover(baseUrl, realm, timeoutMs);
  return algs?.includes(DPOP_ALGORITHM) === true;
}

/**
 * The realm's issuer, from its discovery document through `baseUrl`: the gateway's
 * `PUBLIC_URL/auth/realms/<realm>` (the gateway accepts no other).
 */
export async function realmIssuerOf(
  baseUrl: URL,
  realm: string,
  timeoutMs: number,
): Promise<string> {
  return (await discover(baseUrl, realm, timeoutMs)).issuer;
}

/** The realm's discovery document through `baseUrl`, or a CliError that says what came. */
async function discover(
  baseUrl: URL,
  realm: string,
  timeoutMs: number,
): Promise<oidc.ServerMetadata> {
  const last: Answer = { status: 0, text: '' };
  const gatewayFetch = gatewayFetchOf({ baseUrl, realm, timeoutMs }, last);
  try {
    return await metadataOf(realmUrlOf(baseUrl, realm), apiClientIdOf(realm), gatewayFetch);
  } catch (error) {
    throw cliErrorIn(error) ?? unusableAnswer(last.status, undefined, baseUrl);
  }
}

/** The CliError the gateway's fetch threw, which openid-client may have wrapped (`cause`). */
function cliErrorIn(error: unknown): CliError | undefined {
  return [error, (error as { cause?: unknown } | null)?.cause].find(
    (cause) => cause instanceof CliError,
  );
}

function realmUrlOf(baseUrl: URL, realm: string): URL {
  return new URL(`auth/realms/${encodeURIComponent(realm)}/`, baseUrl);
}

/** `text` as an absolute http(s) URL without query or fragment; undefined otherwise. */
export function httpUrlOf(text: string | undefined): URL | undefined {
  const url = URL.parse(text ?? '');
  const http = url?.protocol === 'http:' || url?.protocol === 'https:';
  return http && !url.search && !url.hash ? url : undefined;
}

/**
 * How far this computer's clock may be from Keycloak's for openid-client's checks of the ID
 * token's times: any distance. The CLI reads nothing from the ID token, and the gateway checks
 * every token's times by its own clock; a laptop whose clock is off still logs in, as before.
 */
const ANY_CLOCK_SECONDS = 10 * 365 * 24 * 3600;

/** The realms discovered by this process (a login retried, a refresh then a call). */
const discovered = new Map<string, oidc.ServerMetadata>();

/**
 * The realm's metadata, from its discovery document through the gateway. Its URL is given in
 * full: openid-client then does not compare the issuer it names, the gateway's PUBLIC_URL, with
 * REALMGATE_URL, which need not be the same (the gateway checks the issuer of every token).
 */
async function metadataOf(
  realmUrl: URL,
  clientId: string,
  gatewayFetch: oidc.CustomFetch,
): Promise<oidc.ServerMetadata> {
  const known = discovered.get(realmUrl.href);
  if (known) return known;
  const config = await oidc.discovery(
    new URL('.well-known/openid-configuration', realmUrl),
    clientId,
    undefined,
    oidc.None(),
    { [oidc.customFetch]: gatewayFetch, execute: [oidc.allowInsecureRequests] },
  );
  // Its helpers are not enumerable: a spread copies the metadata alone.
  const metadata = { ...(config.serverMetadata() as oidc.ServerMetadata) };
  discovered.set(realmUrl.href, metadata);
  return metadata;
}

/**
 * One grant by openid-client on the realm's API client (a public client: its id in the form),
 * after the realm's discovery, both through the gateway's `/auth/`. Its answer: the tokens, or
 * the refusal the token endpoint gave (400, or 401 for wrong credentials); anything else is a
 * CliError that says what the gateway said.
 */
async function tokenRequest(
  target: TokenRequestTarget,
  grant: (config: oidc.Configuration) => Promise<oidc.TokenEndpointResponse>,
): Promise<GrantResult> {
  const { baseUrl, realm } = target;
  const last: Answer = { status: 0, text: '' };
  const realmUrl = realmUrlOf(baseUrl, realm);
  // The token endpoint as REALMGATE_URL reaches it, whatever host Keycloak names: the
  // password and refresh token go nowhere else.
  const tokenUrl = new URL('protocol/openid-connect/token', realmUrl).href;
  let proofUrl: string | undefined;
  try {
    const metadata = await metadataOf(realmUrl, apiClientIdOf(realm), gatewayFetchOf(target, last));
    // The proof names the token endpoint as Keycloak names it (under PUBLIC_URL), the URL it
    // compares `htu` with, while the request goes to REALMGATE_URL.
    // Nothing authenticates that document: the token endpoint it names must be under the
    // login's pinned address, and no downgrade to plain http, before a proof names it.
    if (target.dpopKey !== undefined) {
      const named = httpUrlOf(metadata.token_endpoint);
      if (named !== undefined) checkLearnt(named, baseUrl, target.pinned, 'under');
      proofUrl = named?.href;
    }
    const gatewayFetch = gatewayFetchOf({ ...target, proofUrl }, last);
    const config = new oidc.Configuration(
      { ...metadata, token_endpoint: tokenUrl },
      apiClientIdOf(realm),
      { [oidc.clockTolerance]: ANY_CLOCK_SECONDS },
      oidc.None(),
    );
    config[oidc.customFetch] = gatewayFetch;
    oidc.allowInsecureRequests(config);
    // gatewayFetch times each request out itself.
    config.timeout = 0;
    return { ok: true, tokens: tokensOf(await grant(config), last, baseUrl) };
  } catch (error) {
    if (error instanceof oidc.ResponseBodyError) {
      const description = error.error_description ?? '';
      return {
        ok: false,
        error: printable(error.error),
        description: printable(description),
        ...(target.dpopKey === undefined ? {} : { proofUrl: proofUrl ?? tokenUrl }),
      };
    }
    throw cliErrorIn(error) ?? unusableAnswer(last.status, objectOf(last.text), baseUrl);
  }
}

/** The tokens of a grant openid-client accepted; `expires_in` is required, as the CLI caches by it. */
function tokensOf(answer: oidc.TokenEndpointResponse, last: Answer, baseUrl: URL): Tokens {
  const { access_token: accessToken, expires_in: expiresIn } = answer;
  const refreshToken = answer.refresh_token;
  const refreshFormed =
    typeof refreshToken !== 'string' || refreshToken === '' || isTokenForm(refreshToken);
  if (!isTokenForm(accessToken) || !refreshFormed || typeof expiresIn !== 'number') {
    throw unusableAnswer(last.status, objectOf(last.text), baseUrl);
  }
  const refreshExpiresIn = answer.refresh_expires_in;
  return {
    // openid-client gives the type in lower case.
    bound: answer.token_type.toLowerCase() === 'dpop',
    accessToken,
    expiresIn,
    refreshToken:
      typeof refreshToken === 'string' && refreshToken !== '' ? refreshToken : undefined,
    refreshExpiresIn: typeof refreshExpiresIn === 'number' ? refreshExpiresIn : undefined,
  };
}

/**
 * A JWT's claims, read without verifying the signature: the CLI only takes its own bookkeeping
 * from them (session id, user name); the gateway verifies every token it is sent.
 */
export function unverifiedClaimsOf(jwt: string): Record<string, unknown> {
  try {
    return decodeJwt(jwt);
  } catch {
    return {};
  }
}
